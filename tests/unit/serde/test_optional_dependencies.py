"""The core import needs none of the optional serde dependencies (extras)."""

from __future__ import annotations

import subprocess
import sys

BLOCK = """
import importlib.abc, sys
OPTIONAL = ("httpx", "fastavro", "jsonschema", "google", "pydantic", "referencing")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in OPTIONAL:
            raise ImportError(f"{name} is blocked")
sys.meta_path.insert(0, Block())
"""


def test_core_serde_and_registry_modules_import_without_the_extras() -> None:
    code = BLOCK + (
        "import kafkaio, kafkaio.serde, kafkaio.schema_registry\n"
        "from kafkaio import Producer, Consumer\n"
        "from kafkaio.serde import JsonSerializer\n"
        "assert JsonSerializer()({'a': 1}) == b'{\"a\":1}'\n"
        "from kafkaio.schema_registry import SchemaRegistryClient\n"
        "try:\n"
        "    SchemaRegistryClient('http://127.0.0.1:1')\n"
        "except Exception as exc:\n"
        "    assert \"pip install 'kafkaio[schema-registry]'\" in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('httpx is blocked: the client must say what to install')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

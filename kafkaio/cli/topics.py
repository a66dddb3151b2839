"""``kafkaio topics list|create|delete|describe``: topic administration, as tables or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from kafkaio.admin import ConfigResource, NewTopic
from kafkaio.cli.app import Context, UsageError
from kafkaio.cli.clients import until_shown
from kafkaio.cli.output import emit_json, error_text, table
from kafkaio.errors import KafkaError, TopicAlreadyExistsError, error_for_code


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    topics = sub.add_parser("topics", help="list, create, delete and describe topics")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON")

    p = actions.add_parser("list", parents=[common, as_json], help="list topic names")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p.set_defaults(run=list_topics)

    p = actions.add_parser("create", parents=[common, as_json], help="create a topic")
    p.add_argument("topic")
    p.add_argument("-p", "--partitions", type=int, default=-1, help="(default: broker's)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1, help="(default: broker's)")
    p.add_argument(
        "-c",
        "--topic-config",
        dest="topic_config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config (repeatable)",
    )
    p.add_argument("--if-not-exists", action="store_true", help="succeed if it exists")
    p.set_defaults(run=create_topic)

    p = actions.add_parser("delete", parents=[common, as_json], help="delete topics")
    p.add_argument("topics", nargs="+")
    p.set_defaults(run=delete_topics)

    p = actions.add_parser(
        "describe", parents=[common, as_json], help="partitions, leaders, replicas, configs"
    )
    p.add_argument("topics", nargs="+")
    p.add_argument("--configs", action="store_true", help="also show the topic configs")
    p.set_defaults(run=describe_topics)


async def list_topics(ctx: Context) -> int:
    async with ctx.admin() as admin:
        names = await admin.list_topics(include_internal=ctx.args.internal)
    if ctx.json:
        emit_json(ctx.out, names)
    else:
        ctx.out.write("".join(n + "\n" for n in names))
    return 0


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"topic config {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


async def create_topic(ctx: Context) -> int:
    args = ctx.args
    topic = NewTopic(
        args.topic, args.partitions, args.replication_factor, configs=_configs(args.topic_config)
    )
    async with ctx.admin() as admin:
        result = (await admin.create_topics([topic]))[args.topic]
        error = result.error
        if isinstance(error, TopicAlreadyExistsError) and args.if_not_exists:
            error = None
        if error is None:  # so that the next command finds it
            await until_shown(admin, args.topic, created=True, timeout_ms=ctx.timeout_ms)
    if ctx.json:
        emit_json(ctx.out, result)
    elif error is None:
        ctx.note(f"created topic {args.topic}" if result.error is None else "topic exists")
    if error is not None:
        raise error
    return 0


async def delete_topics(ctx: Context) -> int:
    async with ctx.admin() as admin:
        results = await admin.delete_topics(ctx.args.topics)
        for name, err in results.items():
            if err is None:  # so that the next command no longer finds it
                await until_shown(admin, name, created=False, timeout_ms=ctx.timeout_ms)
    if ctx.json:
        emit_json(ctx.out, {t: {"error": e} for t, e in results.items()})
    failed = [e for e in results.values() if e is not None]
    if not ctx.json:
        for name, err in results.items():
            ctx.note(f"deleted topic {name}" if err is None else f"{name}: {err}")
    return 1 if failed else 0


async def describe_topics(ctx: Context) -> int:
    args = ctx.args
    async with ctx.admin() as admin:
        infos = await admin.describe_topics(args.topics)
        configs = {}
        if args.configs:
            described = await admin.describe_configs(
                [ConfigResource.topic(t) for t in args.topics if t in infos]
            )
            configs = {r.name: d for r, d in described.items()}
    errors: dict[str, KafkaError] = {}
    for name in args.topics:
        info = infos.get(name)
        code = 3 if info is None else info.error
        if code:
            errors[name] = error_for_code(code)(None, topic=name)
    if ctx.json:
        out: dict[str, Any] = {}
        for name in args.topics:
            if name in errors:
                out[name] = {"error": errors[name]}
                continue
            info = infos[name]
            out[name] = {
                "topic_id": info.topic_id,
                "is_internal": info.is_internal,
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": p.replicas,
                        "isr": p.isr,
                        "error": error_for_code(p.error)(None) if p.error else None,
                    }
                    for p in info.partitions
                ],
            }
            if name in configs:
                out[name]["configs"] = {
                    k: e.value for k, e in sorted(configs[name].entries.items())
                }
        emit_json(ctx.out, out)
    else:
        for name in args.topics:
            if name in errors:
                ctx.note(f"{name}: {errors[name]}")
                continue
            info = infos[name]
            ctx.out.write(f"topic {name}  id {info.topic_id}  partitions {len(info.partitions)}\n")
            table(
                ctx.out,
                ("PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ERROR"),
                [
                    (
                        p.partition,
                        p.leader,
                        p.leader_epoch,
                        ",".join(map(str, p.replicas)),
                        ",".join(map(str, p.isr)),
                        error_text(error_for_code(p.error)(None)) if p.error else "",
                    )
                    for p in info.partitions
                ],
            )
            if name in configs:
                for key, entry in sorted(configs[name].entries.items()):
                    ctx.out.write(f"  {key}={entry.value}\n")
    return 1 if errors else 0

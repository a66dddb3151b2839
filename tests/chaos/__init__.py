"""Chaos tests: brokers fail, leaders move and clients restart while records flow."""

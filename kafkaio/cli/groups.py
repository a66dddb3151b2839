"""``kafkaio groups list|describe|lag|reset-offsets|delete``: consumer-group
administration; reset-offsets shows its plan unless --execute is given."""

from __future__ import annotations

import argparse
from typing import Any

from kafkaio.admin import Admin, OffsetSpec
from kafkaio.cli.app import Context, UsageError
from kafkaio.cli.output import emit_json, error_text, table
from kafkaio.errors import KafkaError
from kafkaio.metadata.cluster import TopicPartition


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    groups = sub.add_parser("groups", help="list, describe, lag, reset offsets, delete groups")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON")

    p = actions.add_parser("list", parents=[common, as_json], help="list groups")
    p.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    p.set_defaults(run=list_groups)

    p = actions.add_parser("describe", parents=[common, as_json], help="state and members")
    p.add_argument("groups", nargs="+")
    p.set_defaults(run=describe_groups)

    p = actions.add_parser("lag", parents=[common, as_json], help="committed vs end offsets")
    p.add_argument("group")
    p.set_defaults(run=lag)

    p = actions.add_parser(
        "reset-offsets",
        parents=[common, as_json],
        help="move a group's committed offsets (dry run unless --execute)",
        description="Plan new committed offsets for the partitions of --topic (all the "
        "group's partitions with --all-topics); print the plan, and commit it with "
        "--execute. The group must have no active members.",
    )
    p.add_argument("group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    which.add_argument("--all-topics", action="store_true", help="every partition with a commit")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-timestamp", type=int, metavar="MS")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the plan (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(run=reset_offsets)

    p = actions.add_parser("delete", parents=[common, as_json], help="delete empty groups")
    p.add_argument("groups", nargs="+")
    p.set_defaults(run=delete_groups)


async def list_groups(ctx: Context) -> int:
    async with ctx.admin() as admin:
        groups = await admin.list_groups(states=ctx.args.state)
    if ctx.json:
        emit_json(ctx.out, groups)
    else:
        table(
            ctx.out,
            ("GROUP", "STATE", "TYPE", "PROTOCOL"),
            [(g.group_id, g.state, g.type, g.protocol_type) for g in groups],
        )
    return 0


async def describe_groups(ctx: Context) -> int:
    async with ctx.admin() as admin:
        described = await admin.describe_groups(ctx.args.groups)
    if ctx.json:
        emit_json(ctx.out, described)
    else:
        for g in described.values():
            if g.error is not None:
                ctx.note(f"{g.group_id}: {g.error}")
                continue
            ctx.out.write(
                f"group {g.group_id}  state {g.state}  type {g.group_type}  "
                f"protocol {g.protocol or '-'}  coordinator {g.coordinator}\n"
            )
            table(
                ctx.out,
                ("MEMBER", "CLIENT", "HOST", "ASSIGNMENT"),
                [
                    (m.member_id, m.client_id, m.client_host, ",".join(map(str, m.assignment)))
                    for m in g.members
                ],
            )
    return 1 if any(g.error is not None for g in described.values()) else 0


async def lag(ctx: Context) -> int:
    group = ctx.args.group
    async with ctx.admin() as admin:
        lags = await admin.group_lag(group)
        # a group without committed offsets and a group that does not exist both have none
        # (OffsetFetch answers an unknown group with no partitions): say which it is
        if not lags and not await _group_exists(admin, group):
            ctx.note(f"group {group!r} does not exist (`kafkaio groups list` lists the groups)")
            return 1
    if ctx.json:
        emit_json(
            ctx.out,
            {
                "group": ctx.args.group,
                "total_lag": sum(x.lag or 0 for x in lags.values()),
                "partitions": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "committed": x.committed,
                        "end_offset": x.end_offset,
                        "lag": x.lag,
                        "error": x.error,
                    }
                    for tp, x in lags.items()
                ],
            },
        )
    else:
        table(
            ctx.out,
            ("TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "ERROR"),
            [
                (tp.topic, tp.partition, x.committed, x.end_offset, x.lag, error_text(x.error))
                for tp, x in lags.items()
            ],
        )
    return 0


async def _group_exists(admin: Admin, group: str) -> bool:
    """Whether the coordinator knows ``group`` (`GroupDescription.found`)."""
    described = (await admin.describe_groups([group])).get(group)
    return described is not None and described.found


async def _partitions(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topics:
        committed = await admin.list_group_offsets(args.group)
        return sorted(committed)
    tps: list[TopicPartition] = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        info = (await admin.describe_topics([topic])).get(topic)
        if info is None or info.error:
            raise UsageError(f"topic {topic!r} does not exist")
        known = [p.partition for p in info.partitions]
        try:
            chosen = [int(x) for x in parts.split(",")] if parts else known
        except ValueError:
            raise UsageError(f"--topic {item!r}: expected TOPIC or TOPIC:P,P,...") from None
        for p in chosen:
            if p not in known:
                raise UsageError(f"topic {topic!r} has no partition {p}")
            tps.append(TopicPartition(topic, p))
    return sorted(set(tps))


async def reset_offsets(ctx: Context) -> int:
    args = ctx.args
    async with ctx.admin() as admin:
        tps = await _partitions(admin, args)
        if not tps:
            raise UsageError(f"group {args.group!r} has no committed offsets to reset")
        current = await admin.list_group_offsets(args.group, tps)
        if args.to_offset is not None:
            targets: dict[TopicPartition, int | None] = dict.fromkeys(tps, args.to_offset)
        else:
            spec: OffsetSpec | int = (
                OffsetSpec.EARLIEST
                if args.to_earliest
                else OffsetSpec.LATEST
                if args.to_latest
                else args.to_timestamp
            )
            listed = await admin.list_offsets(dict.fromkeys(tps, spec))
            targets = {}
            for tp, found in listed.items():
                if found.error is not None:
                    raise found.error
                targets[tp] = found.offset
            missing = [tp for tp, o in targets.items() if o is None]
            if missing:  # a timestamp after the last record: the end, as kafka-consumer-groups
                ends = await admin.list_offsets(dict.fromkeys(missing, OffsetSpec.LATEST))
                targets.update({tp: ends[tp].offset for tp in missing})
        plan = {tp: o for tp, o in targets.items() if o is not None}
        errors: dict[TopicPartition, KafkaError | None] = {}
        if args.execute:
            errors = await admin.alter_group_offsets(args.group, plan)
    rows: list[dict[str, Any]] = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current": current[tp].offset if tp in current else None,
            "new": plan.get(tp),
            "error": errors.get(tp),
        }
        for tp in tps
    ]
    if ctx.json:
        emit_json(ctx.out, {"group": args.group, "executed": bool(args.execute), "plan": rows})
    else:
        table(
            ctx.out,
            ("TOPIC", "PARTITION", "CURRENT", "NEW", "ERROR"),
            [
                (r["topic"], r["partition"], r["current"], r["new"], error_text(r["error"]))
                for r in rows
            ],
        )
        if not args.execute:
            ctx.note("dry run: nothing committed; add --execute to commit these offsets")
    failed = [e for e in errors.values() if e is not None]
    if failed:
        raise failed[0]
    return 0


async def delete_groups(ctx: Context) -> int:
    async with ctx.admin() as admin:
        results = await admin.delete_groups(ctx.args.groups)
    if ctx.json:
        emit_json(ctx.out, {g: {"error": e} for g, e in results.items()})
    else:
        for g, err in results.items():
            ctx.note(f"deleted group {g}" if err is None else f"{g}: {err}")
    return 1 if any(e is not None for e in results.values()) else 0

"""The ``migrate`` commands' results as people read them, one printer per command.

Each printer takes the command's result (what :mod:`mongopat.command` returns, the same data ``--format
json`` prints) and standard output (:class:`mongopat.cli.output.Stdout`: ``say`` for plain lines, rich's
console for the rest). Printers that only say lines keep scripted runs free of rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mongopat.migrate.contracts import AppliedResult, StatusRow


def print_plan(result: dict[str, Any], out: Any) -> None:
    verb = "wrote" if result["written"] else "would write"
    for planned in result["files"]:
        out.print(
            f"{verb} {planned['path']}  ({planned['code']} on {planned['collection']}: {planned['description']})",
            markup=False,
        )
    for note in result["notes"]:
        out.print(f"skipped: {note}", markup=False, style="dim", soft_wrap=True)
    if not result["files"]:
        out.print("nothing to plan", markup=False)
        return
    if result["written"]:
        out.print(f"review the files, commit them, then: {result['up']}", markup=False, soft_wrap=True)
    guide = f"what the application must change (reads and writes rewritten): {result['guide']}"
    out.print(guide, markup=False, soft_wrap=True)


def print_status(rows: list[StatusRow], out: Any) -> None:
    from rich.table import Table

    table = Table(header_style="bold")
    # The id is what a user types next (down --to, guide): whole, folded onto a second line if it must be.
    table.add_column("id", overflow="fold")
    for column in ("state", "description", "applied at"):
        table.add_column(column)
    for column in ("read", "written", "seconds"):
        table.add_column(column, justify="right")
    for row in rows:
        state = row["state"] + (" (edited since applied)" if row["edited"] else "")
        if row.get("pending_documents"):
            state += f" ({row['pending_documents']:,} documents in the old shape: run up)"
        table.add_row(
            row["id"],
            state,
            row["description"],
            _when(row["applied_at"]),
            "" if row["read"] is None else f"{row['read']:,}",
            "" if row["written"] is None else f"{row['written']:,}",
            "" if row["duration_s"] is None else f"{row['duration_s']:,.2f}",
        )
    out.print(table)


def _when(value: Any) -> str:
    """A changelog time (UTC, naive as pymongo reads it) with its zone, to the second."""
    import datetime

    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, str) and value:
        return value.replace("T", " ")[:19] + " UTC"
    return ""


def print_up(results: list[AppliedResult], out: Any) -> None:
    """What ``up`` did (or would do, on a dry run)."""
    from bson import json_util as bson_json

    for result in results:
        if result["state"] == "dry-run":
            for step in result["steps"]:
                reads = "" if step.get("would") else f": {step['documents']:,} documents to read"
                out.say(f"{result['id']}: {step['step']} on {step['collection']}{reads}")
                for sentence in step.get("would") or []:
                    out.say(f"  {sentence}")
                for example in step["examples"][:2]:
                    out.say("  before: " + bson_json.dumps(example["before"])[:300], style="dim")
                    out.say("  after:  " + bson_json.dumps(example["after"])[:300])
        elif result["state"] == "caught-up":
            out.say(f"{result['id']}: migrated {result['read']:,} document(s) written in the old shape")
        else:
            out.say(
                f"applied {result['id']}: read {result['read']:,}, wrote {result['written']:,}, "
                f"{result['duration_s']} s"
            )
            for note in result.get("notes") or []:
                out.say(f"  note: {note}", style="dim")


def print_down(reverted: list[str], out: Any) -> None:
    out.say("reverted: " + (", ".join(reverted) or "nothing"))


def print_down_plan(planned: list[dict[str, Any]], out: Any) -> None:
    if not planned:
        out.say("nothing to revert")
    for migration in planned:
        steps = ", ".join(f"{s['step']} on {s['collection']}" for s in migration["steps"]) or "no step ran"
        out.say(f"would revert {migration['id']}: {steps}")


def print_verify(results: dict[str, list[str]], out: Any) -> None:
    for migration, problems in results.items():
        out.print(f"{migration}: " + ("ok" if not problems else "; ".join(problems)), markup=False, soft_wrap=True)
    if not results:
        out.print("no applied migration to verify", markup=False)


def print_predictions(found: dict[str, list[Any]], out: Any) -> None:
    """Predicted against measured, per migration: the figures past the tolerance first."""
    from mongopat.predictions import TOLERANCE, describe

    for migration, differences in found.items():
        off = [d for d in differences if d["beyond_tolerance"]]
        verdict = f"{len(off)} figure(s) off by more than {TOLERANCE:.0%}" if off else "as predicted"
        out.print(f"{migration}: prediction: {verdict}", markup=False, soft_wrap=True)
        for difference in sorted(differences, key=lambda d: not d["beyond_tolerance"]):
            out.print(f"  {describe(difference)}", markup=False, soft_wrap=True)


def print_stamp(result: dict[str, Any], out: Any) -> None:
    if result["to"] == "base":
        forgotten = ", ".join(result["forgotten"]) or "nothing"
        out.print(
            f"forgotten: {forgotten} ({result['backups_removed']} backup(s) removed)", markup=False, soft_wrap=True
        )
        return
    for check in result["checks"]:
        count = check["old_shape"]
        left = "no document shape to check" if count is None else f"{count:,} in the old shape"
        out.print(
            f"{check['id']} step {check['step']} ({check['type']} on {check['collection']}): {left}", markup=False
        )
    if result.get("refused"):
        out.print(f"not stamped: {result['refused']}", markup=False, soft_wrap=True)
    else:
        out.print("stamped: " + (", ".join(result["stamped"]) or "nothing (already applied)"), markup=False)


def print_repair(result: dict[str, Any], out: Any) -> None:
    """What ``repair`` did; the diff was shown before the question, so it is shown again only on a refusal."""
    migration_id = result["id"]
    if not result["changed"]:
        out.print(f"{migration_id}: the file is the one applied; nothing to repair", markup=False, soft_wrap=True)
    elif result.get("refused"):
        if result.get("diff"):
            out.print(result["diff"], markup=False, highlight=False, end="")
        out.print(f"{migration_id}: not repaired: {result['refused']}", markup=False, soft_wrap=True)
    else:
        out.print(f"{migration_id}: the edited file is now the one recorded as applied", markup=False, soft_wrap=True)


def byte_count(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,} B"


def print_rehearsal(result: dict[str, Any], out: Any) -> None:
    from rich.table import Table

    from mongopat.predictions import describe

    copied = ", ".join(f"{c['collection']} {c['copied']:,} of {c['total']:,}" for c in result["copied"])
    out.print(f"copied into {result['scratch']}: {copied}", markup=False, soft_wrap=True)
    table = Table(title="rehearsal", header_style="bold")
    for column in ("migration", "read", "written", "seconds", "backup", "created"):
        table.add_column(column, overflow="fold")
    for entry in result["migrations"]:
        created = [*entry.get("new_collections", []), *(f"index {i['name']}" for i in entry.get("index_builds", []))]
        table.add_row(
            entry["id"],
            f"{entry.get('read', 0):,}",
            f"{entry.get('written', 0):,}",
            f"{entry.get('seconds', 0):.2f}",
            byte_count(entry.get("backup_bytes", 0)),
            ", ".join(created) or "-",
        )
    out.print(table)
    for entry in result["migrations"]:
        estimate = entry.get("estimate")
        if estimate:
            out.print(
                f"{entry['id']} in full: {estimate['read']:,} read, {estimate['written']:,} written, about "
                f"{estimate['seconds']:,.0f} s, backup {byte_count(estimate['backup_bytes'])} ({estimate['basis']})",
                markup=False,
                soft_wrap=True,
            )
    for entry in result["migrations"]:
        checked = entry.get("prediction")
        if not checked:
            continue
        if not checked["compared"]:
            out.print(f"{entry['id']} prediction: {checked['note']}", markup=False, soft_wrap=True)
            continue
        off = [d for d in checked["differences"] if d["beyond_tolerance"]]
        out.print(
            f"{entry['id']} prediction: "
            + (f"{len(off)} figure(s) off by more than {checked['tolerance']:.0%}" if off else "as predicted"),
            markup=False,
        )
        for difference in checked["differences"]:
            out.print(f"  {describe(difference)}", markup=False, soft_wrap=True)
    for entry in result["migrations"]:
        for read in entry.get("explain") or []:
            line = f"{entry['id']} explain {read['read']} on {read['collection']}: "
            line += f"{_planned(read['before'])} -> {_planned(read['after'])}"
            out.print(line, markup=False, soft_wrap=True)
            if read.get("departure"):
                out.print(f"  {read['departure']}", markup=False, soft_wrap=True)
    for failure in result["failures"]:
        out.print(f"difference: {failure}", markup=False, soft_wrap=True)
    for difference in result["differences"]:
        out.print(f"  {difference}", markup=False, soft_wrap=True)
    out.print("rehearsal ok" if result["ok"] else "rehearsal FAILED", markup=False)


def _planned(summary: dict[str, Any] | None) -> str:
    """``index st_1_ts_1: 29 keys, 29 documents examined, 29 returned``"""
    if summary is None:
        return "not explained"
    if summary.get("error"):
        return f"not explained ({summary['error']})"
    where = f"index {summary['index']}" if summary.get("index") else "collection scan"
    sort = ", sort in memory" if summary.get("sort_in_memory") else ""
    return (
        f"{where}: {summary['keys_examined']:,.0f} keys, {summary['docs_examined']:,.0f} documents examined, "
        f"{summary['returned']:,.0f} returned{sort}"
    )


def print_unlock(result: dict[str, Any], out: Any) -> None:
    if result["state"] == "free":
        out.print("the migration lock is free", markup=False)
        return
    out.print(
        f"held by {result.get('host')} (pid {result.get('pid', '?')}, {result.get('holder')}) since "
        f"{result.get('acquired_at')}; lease {'ended' if result['state'] == 'expired' else 'ends'} "
        f"{result.get('expires_at')} UTC",
        markup=False,
        soft_wrap=True,
    )
    if result["released"]:
        out.print("released", markup=False)
    else:
        out.print(f"not released: {result.get('refused')}", markup=False, soft_wrap=True)


def print_guide_check(result: dict[str, Any], out: Any) -> None:
    for migration in result["migrations"]:
        figures = (
            f"{migration['reads_compared']} reads compared ({migration['documents_compared']} documents), "
            f"{migration['writes_applied']} writes applied"
        )
        state = "ok" if not migration["differences"] else f"{len(migration['differences'])} difference(s)"
        unproven = [note for note in migration.get("skipped") or [] if "not proven here" in note]
        if unproven:
            state += f" ({len(unproven)} read(s) not proven on this database)"
        out.print(f"{migration['id']}: {state}: {figures}", markup=False, soft_wrap=True)
        for difference in migration["differences"]:
            out.print(
                f"  {difference['kind']} {difference['name']}: {difference['message']}", markup=False, soft_wrap=True
            )
        for note in migration.get("skipped") or []:
            out.print(f"  {note}", markup=False, soft_wrap=True, style="dim")
    if not result["migrations"]:
        out.print("no applied migration to check", markup=False)

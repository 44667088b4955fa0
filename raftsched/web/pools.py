"""The console's pools page: every pool with its slots, the attempts holding it and those waiting,
and, for a role with ``pools.manage`` (admin), creating, resizing and deleting pools.

A pool is cluster-wide (shared by tasks of every namespace), so the form is drawn only when the
signed-in role grants ``SetPool`` / ``DeletePool``; the RPC checks again. A refused write (a slot
count that is not a whole number in range, a bad name, a delete while tasks name the pool) comes
back as the page with the values as posted and the message (400, or 409 for a conflict); nothing
is stored. The same calls as ``raftsched pool set|delete``, so the same messages.
"""

from __future__ import annotations

import re
from typing import Final

from raftsched.bounds import MAX_POOL_SLOTS
from raftsched.errors import InvalidSpec, RaftschedError
from raftsched.web.base import REFRESH_S, Ctx, Redirect, View
from raftsched.web.editing import refused_status

__all__ = ["ROUTES", "parse_slots"]


def parse_slots(text: str) -> int:
    """The posted slot count, or InvalidSpec naming the field and saying what was posted."""
    text = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):  # not int()'s "1_000" or other scripts' digits
        raise InvalidSpec("pool.slots", f"{text!r} is not a whole number (1-{MAX_POOL_SLOTS})")
    slots = int(text)
    if not 1 <= slots <= MAX_POOL_SLOTS:
        raise InvalidSpec("pool.slots", f"{slots} is not in 1-{MAX_POOL_SLOTS}")
    return slots


def _page(
    ctx: Ctx, *, name: str = "", slots: str = "", description: str = "", error: str = "", status: int = 200
) -> View:
    found = ctx.client.list_pools()
    editing = ctx.arg("edit") if not (name or error) else ""
    for info in found:
        if editing and info.pool.name == editing:  # "Edit" on a row: the form starts from that pool
            name, slots, description = info.pool.name, str(info.pool.slots), info.pool.description
    return View(
        "pools.html",
        {
            "pools": found,
            "refresh": 0 if error else REFRESH_S,  # a refusal stays on screen until acted on
            "form": {"name": name, "slots": slots, "description": description},
            "error": error,
            "max_slots": MAX_POOL_SLOTS,
        },
        status=status,
        title="Pools",
    )


def pools(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    return _page(ctx)


def set_pool(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = ctx.form.get("name", "").strip()
    slots_text = ctx.form.get("slots", "")
    description = ctx.form.get("description", "").strip()
    try:
        slots = parse_slots(slots_text)
        existing = {info.pool.name: info.pool.slots for info in ctx.client.list_pools()}
        record = ctx.client.set_pool(name, slots, description=description)
    except RaftschedError as exc:
        return _page(
            ctx,
            name=name,
            slots=slots_text,
            description=description,
            error=str(exc),
            status=refused_status(exc),
        )
    plural = "s" if record.slots != 1 else ""
    if name not in existing:
        said = f"created pool {record.name} with {record.slots} slot{plural}"
    elif existing[name] != record.slots:
        said = f"pool {record.name} resized from {existing[name]} to {record.slots} slot{plural}"
    else:
        said = f"pool {record.name} updated ({record.slots} slot{plural})"
    return Redirect("/pools", ("ok", said))


def delete_pool(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    try:
        ctx.client.delete_pool(name)
    except RaftschedError as exc:  # a conflict while tasks name it: the message lists them
        return _page(ctx, error=str(exc), status=refused_status(exc))
    return Redirect("/pools", ("ok", f"pool {name} deleted"))


ROUTES: Final = [
    ("GET", r"/pools", pools, False),
    ("POST", r"/pools", set_pool, False),
    ("POST", r"/pools/(?P<name>[^/]+)/delete", delete_pool, False),
]
"""The pools routes, appended to :data:`raftsched.web.views.ROUTES`."""

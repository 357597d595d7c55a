"""Papelo's text forms of page elements (Malon 2021, Table 1) and wiki-link markup.

* sentence: ``[Title] sentence``
* list item: ``[Title] CONTEXT <element before the list> VALUE <item>``
* table cell: the whole row as ``KEY header VALUE value`` pairs (``VALUE value`` where no header
  is above), the current cell's pair wrapped in ``{{ … }}``, ``CAPTION caption`` first when the
  table has one
* caption: ``[Title] CAPTION caption``

:func:`readable_row` turns a row back into plain text for models trained on prose.

Table 1 of the paper prints the list form as ``LIST CONTEXT``; its text and docs/design.md say
``CONTEXT``, which is the contract here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# [[Target|anchor]] or [[Target]]; targets never contain "]" or "|".
_LINK = re.compile(r"\[\[([^\]|]*)(?:\|([^\]]*))?\]\]")
# A row's linearization: its head, then pairs; a value ends where the next pair begins.
_ROW_HEAD = re.compile(r"\[(?P<title>.*?)\](?: CAPTION (?P<caption>.*?))?(?= KEY | VALUE |$)")
_ROW_PAIR = re.compile(r" (?:KEY (?P<key>.*?) )?VALUE (?P<value>.*?)(?= KEY | VALUE |$)")


def strip_links(text: str) -> tuple[str, tuple[str, ...]]:
    """Replace ``[[Target|anchor]]`` by ``anchor`` (``[[Target]]`` by ``Target``) and return the
    plain text with the link targets as page titles (underscores read as spaces)."""
    if "[[" not in text:
        return text, ()
    targets: list[str] = []

    def replace(match: re.Match[str]) -> str:
        target, anchor = match.group(1), match.group(2)
        if target.strip():
            targets.append(target.replace("_", " ").strip())
        return anchor if anchor is not None else target

    return _LINK.sub(replace, text), tuple(dict.fromkeys(targets))


def sentence(title: str, text: str) -> str:
    return f"[{title}] {text}"


def list_item(title: str, context: str, item: str) -> str:
    if context:
        return f"[{title}] CONTEXT {context} VALUE {item}"
    return f"[{title}] VALUE {item}"


def untitled(title: str, linearized: str) -> str:
    """A sentence's or list item's linearization without its ``[title]`` prefix (what follows
    the title when one page's sentences are read as one passage)."""
    return linearized.removeprefix(f"[{title}] ")


def caption(title: str, text: str) -> str:
    return f"[{title}] CAPTION {text}"


def row_pairs(values: Sequence[str], keys: Sequence[str | None]) -> list[str]:
    """The ``KEY k VALUE v`` pair of each cell of a row (``VALUE v`` where it has no header)."""
    return [
        f"KEY {key} VALUE {value}" if key else f"VALUE {value}"
        for value, key in zip(values, keys, strict=True)
    ]


def _row_prefix(title: str, table_caption: str) -> str:
    return f"[{title}] CAPTION {table_caption}" if table_caption else f"[{title}]"


def cell(title: str, table_caption: str, pairs: Sequence[str], index: int) -> str:
    """The row with pair ``index`` marked: the linearization of that row's ``index``-th cell."""
    marked = [*pairs[:index], f"{{{{ {pairs[index]} }}}}", *pairs[index + 1 :]]
    return " ".join([_row_prefix(title, table_caption), *marked])


def row(title: str, table_caption: str, pairs: Sequence[str]) -> str:
    """The row with no cell marked: the text the row's one shared embedding is computed from."""
    return " ".join([_row_prefix(title, table_caption), *pairs])


def readable_row_parts(linearized: str) -> tuple[str, str] | None:
    """A row's linearization as plain text in two parts, ``("Title, caption", "header: value;
    value")`` (the ``{{ }}`` marker dropped, so every cell of a row gives the same parts); None
    for text that is not a row. A value that itself holds `` KEY `` or `` VALUE `` is split
    there."""
    text = linearized.replace("{{ ", "").replace(" }}", "")
    head = _ROW_HEAD.match(text)
    if head is None:
        return None
    pairs = [
        f"{pair['key']}: {pair['value']}" if pair["key"] else pair["value"]
        for pair in _ROW_PAIR.finditer(text, head.end())
    ]
    title, table_caption = head["title"], head["caption"]
    if table_caption and table_caption.casefold() != title.casefold():
        title = f"{title}, {table_caption}"
    return title, "; ".join(pairs)


def readable_row(linearized: str) -> str:
    """A cell's or row's linearization as plain text, ``Title, caption. header: value; value``.

    The ms-marco cross-encoders were trained on web passages: on 1,000 TabFact dev claims they
    rank tables by their best row better in this form than in the KEY / VALUE markup (gold-table
    Hits@5 82.5 against 81.9, both fused with the table score). Text that is not a row comes
    back unchanged.
    """
    parts = readable_row_parts(linearized)
    if parts is None:
        return linearized
    return f"{parts[0]}. {parts[1]}"

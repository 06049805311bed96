"""The results a Python example states in its comments, turned into checks.

``x = f()  # -> (2, 10)`` states what the statement gives: a tensor as its shape, a tuple or list
item by item (each a tensor's shape or a repr), anything else as its ``repr``; ``...`` stands for
any text, and what follows two spaces is a remark. ``f()  # raises ValueError: text`` states that
the call raises that error (or a subclass) with a message starting so.
"""

import ast
import re

STATES = re.compile(r"#\s*->\s*(.+?)(?:\s{2,}.*)?\s*$")
"""``# -> VALUE``; after two spaces a remark follows that is not checked."""
RAISES = re.compile(r"#\s*raises\s+(\w+):\s*(.+?)\s*$")

PRELUDE = """
import re as _re

def _docs_item(value):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return str(tuple(value.shape))
    return repr(value)

def _docs_show(value):
    if isinstance(value, (tuple, list)):
        return ", ".join(_docs_item(item) for item in value)
    return _docs_item(value)

def _docs_fits(text, stated):
    pattern = ".*?".join(_re.escape(" ".join(part.split())) for part in stated.split("..."))
    return _re.fullmatch(pattern, " ".join(text.split())) is not None

def _docs_states(where, value, stated):
    shown = _docs_show(value)
    assert _docs_fits(shown, stated), f"{where}: the page states {stated!r}, the code gives {shown!r}"

def _docs_raises(where, error, name, stated):
    if error is None:
        raise AssertionError(f"{where}: the page states that this raises {name}, it did not")
    if name not in {kind.__name__ for kind in type(error).__mro__} or not _docs_fits(str(error), stated + "..."):
        raise AssertionError(f"{where}: the page states {name}: {stated!r}, the code raised {error!r}")
"""


def _innermost(tree: ast.Module, line: int) -> ast.stmt:
    """The smallest statement whose lines include ``line``."""
    spans = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not spans:
        raise AssertionError(f"line {line}: a stated result on a line without a statement")
    return min(spans, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)


def _value_of(stmt: ast.stmt, where: str) -> ast.expr:
    """What a statement gives: its targets for an assignment, the expression itself otherwise."""
    if isinstance(stmt, ast.Assign):
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        return stmt.target
    if isinstance(stmt, ast.Expr):
        return stmt.value
    raise AssertionError(f"{where}: a stated result after a statement that gives no value")


def _load(target: ast.expr) -> ast.expr:
    """An assignment target read back as an expression."""
    return ast.parse(ast.unparse(target), mode="eval").body


def _checked(stmt: ast.stmt, comment: str, where: str) -> list[ast.stmt]:
    """The statement followed by (or wrapped in) the check its comment states."""
    if states := STATES.search(comment):
        check = ast.parse(f"_docs_states({where!r}, None, {states.group(1)!r})").body[0]
        check.value.args[1] = _load(_value_of(stmt, where))  # type: ignore[attr-defined]
        return [stmt, check]
    name, stated = RAISES.search(comment).groups()  # type: ignore[union-attr]
    wrapper = ast.parse(
        f"_docs_error = None\ntry:\n    pass\nexcept Exception as _e:\n    _docs_error = _e\n"
        f"_docs_raises({where!r}, _docs_error, {name!r}, {stated!r})"
    ).body
    wrapper[1].body = [stmt]  # type: ignore[attr-defined]
    return wrapper


class _Checks(ast.NodeTransformer):
    """Rewrites every statement list so the statements with a stated result check it."""

    def __init__(self, comments: dict[int, tuple[ast.stmt, str, str]]):
        self.comments = comments

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                setattr(node, name, [new for stmt in stmts for new in self._expand(stmt)])
        return node

    def _expand(self, stmt: ast.stmt) -> list[ast.stmt]:
        for target, comment, where in self.comments.values():
            if target is stmt:
                return _checked(stmt, comment, where)
        return [stmt]


def instrument(source: str, page: str, first_line: int) -> str:
    """The example's source with a check after every statement whose comment states a result.

    ``first_line`` is the page's line of the block's first line, so a failed check names the page's line.
    """
    tree = ast.parse(source)
    comments = {}
    for number, line in enumerate(source.splitlines(), start=1):
        if STATES.search(line) or RAISES.search(line):
            comments[number] = (_innermost(tree, number), line, f"{page}:{first_line + number - 1}")
    tree = _Checks(comments).visit(tree)
    return PRELUDE + ast.unparse(ast.fix_missing_locations(tree))

"""papermill's translator for the DRYML Rust kernel (`papermill -k dryml-rust`).

papermill writes a notebook's parameters as code in the kernel's language. For Rust that code
must give each value the type the notebook's `parameters` cell declared (`let lr: f64 = 0.1;`
run with `-p lr 1` needs `1.0_f64`, where `let lr = 1;` would make an `i32` that breaks every
later use of `lr`), and only the kernel knows those types. So the injected cell is the kernel's
`%%parameters` magic, one `NAME = JSON` line per parameter, and the kernel writes the `let`s.
"""
import json
import re

from papermill.engines import NBClientEngine
from papermill.models import Parameter
from papermill.translators import Translator, papermill_translators

# papermill's own nbclient engine under the kernel's name: importing this module through the
# entry point is what registers the translator below.
Engine = NBClientEngine

# `let [mut] name[: Type] = value; // help`, a declaration of a `parameters` cell.
_LET = re.compile(r"^\s*let\s+(?:mut\s+)?([A-Za-z_]\w*)\s*(?::\s*([^=]+?))?\s*=\s*(.+?)\s*;\s*(?://\s*(.*))?$")


class RustTranslator(Translator):
    """Values as JSON lines of a `%%parameters` cell, typed by the kernel."""

    @classmethod
    def translate(cls, val):
        # NaN and the infinities as Python writes them (the kernel reads them as f64's).
        return json.dumps(val, default=str)

    @classmethod
    def comment(cls, cmt_str):
        return f"// {cmt_str}".strip()

    @classmethod
    def assign(cls, name, str_val):
        return f"{name} = {str_val}"

    @classmethod
    def codify(cls, parameters, comment="Parameters"):
        lines = ["%%parameters", cls.comment(comment)]
        lines += [cls.assign(name, cls.translate(val)) for name, val in parameters.items()]
        return "\n".join(lines) + "\n"

    @classmethod
    def inspect(cls, parameters_cell):
        """The `let`s of a `parameters` cell, for `papermill --help-notebook`."""
        params = []
        for line in parameters_cell.source.splitlines():
            m = _LET.match(line)
            if m:
                name, type_name, default, help_text = m.groups()
                params.append(Parameter(name=name, inferred_type_name=(type_name or "None").strip(),
                                        default=default, help=(help_text or "").strip()))
        return params


papermill_translators.register("rust", RustTranslator)
papermill_translators.register("dryml-rust", RustTranslator)

//! The body's notebook lines: what becomes Rust, what stays, and the errors.

use super::*;

// No leading `::`: evcxr reads a line starting with `:` as its command.
const LINE: &str = "dryml::__kernel::shell::line";

#[test]
fn shell_lines_become_statements_in_place() {
    let table: &[(&str, String)] = &[
        ("!ls -l", format!("{LINE}(\"ls -l\");")),
        ("  ! echo hi", format!("  {LINE}(\"echo hi\");")),
        ("!echo {n}", format!("{LINE}(&::std::format!(\"echo {{}}\", (n)));")),
        ("!echo {v.len() + 1} done", format!("{LINE}(&::std::format!(\"echo {{}} done\", (v.len() + 1)));")),
        // The shell's own braces: parameters, brace expansion, ranges, empty, escaped, awk.
        ("!echo ${HOME}", format!("{LINE}(\"echo ${{HOME}}\");")),
        ("!echo {a,b} {1..5} {}", format!("{LINE}(\"echo {{a,b}} {{1..5}} {{}}\");")),
        ("!echo {{n}}", format!("{LINE}(\"echo {{n}}\");")),
        ("!awk '{print $1}' f", format!("{LINE}(\"awk '{{print $1}}' f\");")),
        ("!echo \"$X\" {x} ${Y}", format!("{LINE}(&::std::format!(\"echo \\\"$X\\\" {{}} ${{{{Y}}}}\", (x)));")),
        ("!echo é {x}", format!("{LINE}(&::std::format!(\"echo é {{}}\", (x)));")),
    ];
    for (cell, want) in table {
        assert_eq!(rewrite(cell, 1).unwrap(), *want, "{cell:?}");
    }
}

#[test]
fn only_lines_where_a_statement_starts_are_shell_lines() {
    // Rust's own `!` at a line start: a continued expression, a comparison, a string, a comment.
    let kept = [
        "let ok = a &&\n    !b;",
        "let ne = a\n  != b;",
        "let s = \"x\n!ls\";",
        "let s = r#\"x\n!ls\"#;",
        "/* a\n!ls\n*/",
        "let c = '\"';\nlet d = f(\n!ls);",
        "x == y\n!= z",
    ];
    for cell in kept {
        assert_eq!(rewrite(cell, 1).unwrap(), cell, "{cell:?}");
    }
    // After `;`, `{`, `}`, a comment, blank lines and evcxr's commands it is one.
    let cell = ":dep regex = \"1\"\n!a\nlet x = 1; // note\n\n!b\nfor i in 0..2 {\n    !c {i}\n}\n!d";
    let out = rewrite(cell, 1).unwrap();
    assert_eq!(out.lines().filter(|l| l.contains(LINE)).count(), 4, "{out}");
    assert_eq!(out.lines().count(), cell.lines().count(), "line for line");
    assert!(out.starts_with(":dep regex = \"1\"\n"));
}

#[test]
fn timeit_lines_time_the_rest_of_the_line() {
    let out = rewrite("let v = vec![1u8; 100];\n%timeit v.iter().sum::<u8>()", 1).unwrap();
    let second = out.lines().nth(1).unwrap();
    assert!(second.starts_with("dryml::__kernel::timeit::line(dryml::timeit::Options { number: None, repeat: 7, quiet: false, precision: 3 }, || { v.iter().sum::<u8>() });"), "{second}");
    // -o on the last line: the result is the cell's value; `let r = %timeit -o ...;` keeps it.
    let out = rewrite("%timeit -o -n 10 -r2 f(x)", 1).unwrap();
    assert!(out.contains("number: Some(10), repeat: 2,") && out.ends_with("|| { f(x) })"), "{out}");
    let out = rewrite("let r = %timeit -o -q f(x);\nr.average()", 1).unwrap();
    assert!(out.starts_with("let r = dryml::__kernel::timeit::line(") && out.contains("quiet: true"), "{out}");
    assert!(out.lines().next().unwrap().ends_with("|| { f(x) });"), "{out}");
    // `-x` is code, not an option.
    assert!(rewrite("%timeit -x.abs()", 1).unwrap().contains("|| { -x.abs() }"));
}

#[test]
fn bad_lines_are_errors_naming_line_and_column() {
    let e = rewrite("let a = 1;\n!", 4).unwrap_err();
    assert_eq!((e.line, e.column, e.message.as_str()), (5, 1, "`!` needs a shell command after it"));
    let e = rewrite("%timeit -n x f()", 1).unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.message.starts_with("%timeit: -n (loops per run) takes a whole number above 0"), "{}", e.message);
    let e = rewrite("%timeit -n 5", 2).unwrap_err();
    assert_eq!((e.line, e.message.as_str()), (2, "%timeit: the expression to time is missing"));
    let e = rewrite("let x = 1;\n  %cd /tmp", 1).unwrap_err();
    assert_eq!((e.line, e.column), (2, 3));
    assert!(e.message.starts_with("`%cd` must come before the cell's code"), "{}", e.message);
    // `%` continuing an expression is Rust's.
    assert_eq!(rewrite("let m = a\n  % b;", 1).unwrap(), "let m = a\n  % b;");
}

#[test]
fn a_timeit_cell_is_one_closure_line_for_line() {
    let opts = crate::timeit::TimeitOptions::default();
    let out = timeit_cell(&opts, "let s: u64 = (0..n).sum();\ns");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.starts_with("dryml::__kernel::timeit::line(") && out.contains("|| { let s: u64"), "{out}");
    assert!(out.ends_with("\n});"), "{out}");
    let o = crate::timeit::TimeitOptions { output: true, ..opts };
    assert!(timeit_cell(&o, "f()").ends_with("})"));
}

//! Data-driven tables for the magic parser.

use super::*;

fn names(p: &ParsedCell) -> Vec<String> {
    p.line_magics.iter().chain(p.cell_magic.iter()).map(|i| i.spec.display_name()).collect()
}

#[test]
fn cells_that_parse() {
    // (cell, magics found, body left for rustc, positionals of the first magic)
    let table: &[(&str, &[&str], &str, &[&str])] = &[
        ("let x = 1;", &[], "let x = 1;", &[]),
        ("", &[], "", &[]),
        ("%lsmagic", &["%lsmagic"], "", &[]),
        ("%lsmagic\nlet y = 2;", &["%lsmagic"], "let y = 2;", &[]),
        ("\n  %lsmagic\n\nx", &["%lsmagic"], "x", &[]),
        ("%%time\nlet z = 3;\nz", &["%%time"], "let z = 3;\nz", &[]),
        ("%env", &["%env"], "", &[]),
        ("%env HOME", &["%env"], "", &["HOME"]),
        ("%env A=1", &["%env"], "", &["A=1"]),
        ("%env A 'x y'", &["%env"], "", &["A", "x y"]),
        ("%env A \"a \\\"q\\\"\"", &["%env"], "", &["A", "a \"q\""]),
        ("%env -u A B", &["%env"], "", &["A", "B"]),
        ("%env --unset A\n%lsmagic\n1", &["%env", "%lsmagic"], "1", &["A"]),
        ("%experiment start", &["%experiment"], "", &["start"]),
        ("%experiment start 'lr sweep'", &["%experiment"], "", &["start", "lr sweep"]),
        ("%experiment keep a b_2", &["%experiment"], "", &["keep", "a", "b_2"]),
        ("%experiment finish\nx", &["%experiment"], "x", &["finish"]),
        ("%%experiment\nlet v = 1;", &["%%experiment"], "let v = 1;", &[]),
        ("%%experiment big --keep a,b\nx", &["%%experiment"], "x", &["big"]),
        ("%cell_logger on", &["%cell_logger"], "", &["on"]),
        ("%cell_logger plot\n1", &["%cell_logger"], "1", &["plot"]),
    ];
    for (cell, magics, body, pos) in table {
        let parsed = parse_cell(cell).unwrap_or_else(|e| panic!("{cell:?}: {e}"));
        assert_eq!(&names(&parsed), magics, "magics of {cell:?}");
        assert_eq!(parsed.body, *body, "body of {cell:?}");
        let first = parsed.line_magics.first().or(parsed.cell_magic.as_ref());
        let got: Vec<&str> = first.map(|i| i.args.positionals.iter().map(String::as_str).collect()).unwrap_or_default();
        assert_eq!(&got, pos, "positionals of {cell:?}");
    }
}

#[test]
fn flags_and_help() {
    let p = parse_cell("%env -u A").unwrap();
    assert!(p.line_magics[0].args.flag("unset"));
    let p = parse_cell("%env?").unwrap();
    assert!(p.line_magics[0].help);
    let p = parse_cell("%%time?\nx").unwrap();
    assert!(p.cell_magic.as_ref().unwrap().help);
    assert!(p.cell_magic.unwrap().spec.help_text().contains("Usage: %%time"));
}

#[test]
fn cells_that_fail() {
    // (cell, words the message must contain, line, column, suggestion)
    let table: &[(&str, &str, usize, usize, Option<&str>)] = &[
        ("%lsmagik", "unknown magic `%lsmagik`", 1, 2, Some("%lsmagic")),
        ("%tme", "unknown magic `%tme`", 1, 2, Some("%%time")),
        ("%time", "`%time` is not a line magic", 1, 2, Some("%%time")),
        ("%%env A=1", "`%%env` is not a cell magic", 1, 3, Some("%env")),
        ("%%nosuchthing", "unknown magic", 1, 3, None),
        ("%", "expected a magic name", 1, 2, None),
        ("%lsmagic extra", "%lsmagic: takes no arguments, got `extra`", 1, 10, None),
        ("%lsmagic --all", "unknown option `--all`", 1, 10, None),
        ("%env --bogus", "unknown option `--bogus` (known: --unset)", 1, 6, None),
        ("%env 'unclosed", "unclosed ' quote", 1, 6, None),
        ("%env -u", "--unset needs the NAME", 1, 8, None),
        ("%env A B C", "at most NAME and VALUE", 1, 10, None),
        ("%env =x", "`` is not a valid variable name", 1, 6, None),
        ("%lsmagic\n  %%time", "must be the first line", 2, 3, None),
        ("%env?  x", "takes no arguments", 1, 6, None),
        ("%experiment", "missing required argument SUBCOMMAND", 1, 12, None),
        ("%experiment begin", "unknown subcommand `begin`", 1, 13, None),
        ("%experiment start a b", "at most one NAME", 1, 21, None),
        ("%experiment keep", "keep needs the NAMEs", 1, 17, None),
        ("%experiment keep ok 9bad", "`9bad` is not a variable name", 1, 21, None),
        ("%experiment finish now", "finish takes no arguments", 1, 20, None),
        ("%experiment start --preload jax", "unknown framework `jax` for --preload (known: torch)", 1, 29, None),
        ("%experiment data --preload torch", "--preload goes with start", 1, 28, None),
        ("%experiment finish --tensorboard tb", "--tensorboard goes with start", 1, 34, None),
        ("%experiment start --mlflow localhost:5000", "expected a tracking server's http:// URI", 1, 28, None),
        ("%%experiment --tensorboard ''\nx", "--tensorboard needs a directory", 1, 28, None),
        ("%%experiment --keep a,,b\nx", "`` is not a variable name", 1, 21, None),
        ("%%experiment --keep=a-b\nx", "`a-b` is not a variable name", 1, 14, None),
        ("%%experiment --keep\nx", "option --keep needs a value", 1, 14, None),
        ("%%experiment a b\nx", "unexpected argument `b`", 1, 16, None),
        ("%cell_logger", "missing required argument MODE", 1, 13, None),
        ("%cell_logger loud", "unknown mode `loud`", 1, 14, None),
        ("%cell_loger on", "unknown magic", 1, 2, Some("%cell_logger")),
        ("%%compute --on mars\nx", "--on takes `local` or `slurm`, not `mars`", 1, 16, None),
        ("%%compute --detach\nx", "--detach goes with --on slurm", 1, 11, None),
        ("%%compute --on slurm --use-existing\nx", "--use-existing is about the notebook's own context", 1, 22, None),
        ("%slurm partition", "expected key=value, got `partition`", 1, 8, None),
        ("%slurm partion=gpu", "unknown key `partion`", 1, 8, None),
        ("%slurm time=soon", "time: expected seconds", 1, 8, None),
        ("%slurm mem=lots", "mem: `lots` is not a size", 1, 8, None),
        ("%slurm shards_per_gpu=0", "expected a positive whole number", 1, 8, None),
        ("%jobs wait", "wait needs a job ID", 1, 11, None),
        ("%jobs wait x1", "`x1` is not a Slurm job ID", 1, 12, None),
        ("%jobs result 3 into v", "expected `as VAR`, got `into`", 1, 16, None),
        ("%jobs result 3 as 9v", "`9v` is not a variable name", 1, 19, None),
        ("%jobs stop 3", "unknown subcommand `stop`", 1, 7, None),
        ("%%sweep --repo r\nx", "missing required argument DEFS", 1, 17, None),
        ("%%sweep defs\nx", "needs --repo DIR", 1, 13, None),
        ("%%sweep 9d --repo r\nx", "`9d` is not a variable name", 1, 9, None),
        ("%%sweep defs --repo r --timeout 5\nx", "--timeout applies to a sweep's Slurm tasks", 1, 33, None),
    ];
    for (cell, words, line, col, sugg) in table {
        let err = parse_cell(cell).expect_err(cell);
        assert!(err.message.contains(words), "{cell:?}: got {:?}", err.message);
        assert_eq!((err.line, err.column), (*line, *col), "{cell:?}: position");
        assert_eq!(err.suggestion.as_deref(), *sugg, "{cell:?}: suggestion");
    }
}

#[test]
fn caret_points_at_the_column() {
    let err = parse_cell("%env --bogus").unwrap_err();
    assert_eq!(err.caret(), "%env --bogus\n     ^");
}

#[test]
fn repo_lines() {
    // (line, None when valid, or (words of the error, 1-based column))
    let table: &[(&str, Option<(&str, usize)>)] = &[
        ("%repo open /tmp/r --create", None),
        ("%repo ls", None),
        ("%repo get Mlp lr=0.1 data.name=mnist", None),
        ("%repo get * 0=2", None),
        ("%repo show abc", None),
        ("%repo load abc as model", None),
        ("%repo", Some(("expected a subcommand", 6))),
        ("%repo list", Some(("unknown subcommand `list`", 7))),
        ("%repo get Mlp lr", Some(("`lr` is not key=value", 15))),
        ("%repo get lr=0.1", Some(("the first word is the type name", 11))),
        ("%repo load abc as 9x", Some(("`9x` is not a variable name", 19))),
        ("%repo load abc model", Some(("expected `load ID as VAR`", 12))),
        ("%repo ls --create", Some(("--create goes with `open`", 10))),
        ("%repo open", Some(("open takes one DIR", 11))),
    ];
    for (line, want) in table {
        match (parse_cell(line), want) {
            (Ok(_), None) => {}
            (Err(e), Some((words, col))) => {
                assert!(e.message.contains(words), "{line}: {}", e.message);
                assert_eq!(e.column, *col, "{line}: {}", e.caret());
            }
            (r, w) => panic!("{line}: got {r:?}, wanted {w:?}"),
        }
    }
}

#[test]
fn completion_and_listing() {
    assert_eq!(complete("%ls"), vec!["%lsmagic"]);
    assert_eq!(
        complete("%%"),
        vec![
            "%%bash",
            "%%compute",
            "%%experiment",
            "%%parameters",
            "%%sh",
            "%%sweep",
            "%%time",
            "%%timeit",
            "%%writefile"
        ]
    );
    assert_eq!(complete("%ti"), vec!["%timeit"]);
    assert!(complete("%").contains(&"%env".to_string()));
    let text = lsmagic_text();
    for m in REGISTRY.iter() {
        assert!(text.contains(&m.display_name()), "{} missing", m.name);
    }
}

#[test]
fn tokenizer_columns() {
    let t = tokenize(" a  'b c' d").unwrap();
    let cols: Vec<(String, usize)> = t.into_iter().map(|t| (t.text, t.column)).collect();
    assert_eq!(cols, vec![("a".into(), 1), ("b c".into(), 4), ("d".into(), 10)]);
}

#[test]
fn calls_are_typed_once() {
    use crate::call::*;
    let line = |cell: &str| parse_cell(cell).unwrap().line_magics[0].line_call().cloned().unwrap();
    let cell = |cell: &str| parse_cell(cell).unwrap().cell_magic.unwrap().cell_call().cloned().unwrap();
    let table: &[(&str, LineCall)] = &[
        ("%lsmagic", LineCall::Lsmagic),
        ("%env", LineCall::Env(EnvCall::Show(None))),
        ("%env HOME", LineCall::Env(EnvCall::Show(Some("HOME".into())))),
        ("%env A=1=2", LineCall::Env(EnvCall::Set { name: "A".into(), value: "1=2".into() })),
        ("%env A 'x y'", LineCall::Env(EnvCall::Set { name: "A".into(), value: "x y".into() })),
        ("%env -u A B", LineCall::Env(EnvCall::Unset(vec!["A".into(), "B".into()]))),
        (
            "%experiment start 'lr sweep'",
            LineCall::Experiment(ExperimentCall::Start {
                name: Some("lr sweep".into()),
                preload: None,
                tensorboard: None,
                mlflow: None,
            }),
        ),
        (
            "%experiment start --preload torch",
            LineCall::Experiment(ExperimentCall::Start {
                name: None,
                preload: Some(Preload::Torch),
                tensorboard: None,
                mlflow: None,
            }),
        ),
        (
            "%experiment start --tensorboard runs/tb",
            LineCall::Experiment(ExperimentCall::Start {
                name: None,
                preload: None,
                tensorboard: Some("runs/tb".into()),
                mlflow: None,
            }),
        ),
        ("%experiment keep a b", LineCall::Experiment(ExperimentCall::Keep(vec!["a".into(), "b".into()]))),
        ("%experiment data", LineCall::Experiment(ExperimentCall::Data)),
        ("%experiment finish", LineCall::Experiment(ExperimentCall::Finish)),
        ("%cell_logger compact", LineCall::CellLogger(LoggerCall::Compact)),
        ("%repo open /tmp/r --create", LineCall::Repo(RepoCall::Open { dir: "/tmp/r".into(), create: true })),
        ("%repo ls", LineCall::Repo(RepoCall::Ls)),
        ("%repo rm 42", LineCall::Repo(RepoCall::Rm("42".into()))),
        ("%repo load 42 as m", LineCall::Repo(RepoCall::Load { id: "42".into(), var: "m".into() })),
        ("%slurm", LineCall::Slurm(SlurmCall::Show)),
        (
            "%slurm partition=gpu time=2h mem=4G account= sbatch='--nice=5 --exclusive'",
            LineCall::Slurm(SlurmCall::Set(vec![
                SlurmSetting::Partition(Some("gpu".into())),
                SlurmSetting::Time(Some(7200.0)),
                SlurmSetting::Mem(Some(4 << 30)),
                SlurmSetting::Account(None),
                SlurmSetting::Sbatch(vec!["--nice=5".into(), "--exclusive".into()]),
            ])),
        ),
        ("%jobs", LineCall::Jobs(JobsCall::List)),
        ("%jobs wait 12", LineCall::Jobs(JobsCall::Wait(12))),
        ("%jobs result 12 as w", LineCall::Jobs(JobsCall::Result { id: 12, var: Some("w".into()) })),
        ("%jobs cancel 3", LineCall::Jobs(JobsCall::Cancel(3))),
    ];
    for (text, want) in table {
        assert_eq!(&line(text), want, "{text}");
    }
    let LineCall::Repo(RepoCall::Get(q)) = line("%repo get Mlp lr=0.1 data.name=mnist") else { panic!("a get") };
    assert_eq!(q.type_name.as_deref(), Some("Mlp"));
    assert_eq!(q.kwargs.unwrap()["lr"], serde_json::json!(0.1));
    assert_eq!(cell("%%time\nx"), CellCall::Time);
    assert_eq!(cell("%%parameters\nlr = 0.05"), CellCall::Parameters);
    assert_eq!(
        cell("%%experiment big --keep a,b\nx"),
        CellCall::Experiment {
            name: Some("big".into()),
            keep: vec!["a".into(), "b".into()],
            preload: None,
            tensorboard: None,
            mlflow: None
        }
    );
    assert!(matches!(
        cell("%%experiment fit --mlflow http://127.0.0.1:5000\nx"),
        CellCall::Experiment { mlflow: Some(u), .. } if u == "http://127.0.0.1:5000"
    ));
    assert!(matches!(
        cell("%%experiment --preload tch\nx"),
        CellCall::Experiment { preload: Some(Preload::Torch), .. }
    ));
    assert!(matches!(
        cell("%%experiment lr --tensorboard 'my runs'\nx"),
        CellCall::Experiment { tensorboard: Some(d), .. } if d == "my runs"
    ));
    assert!(
        matches!(cell("%%compute tf num_cpus=1 --timeout 2\nx"), CellCall::Compute(o) if o.timeout == Some(2.0) && o.slurm.is_none())
    );
    let CellCall::Sweep(o) = cell("%%sweep defs --repo /tmp/r tf num_cpus=2 --on slurm --timeout 60\n|m: &mut M| 1")
    else {
        panic!()
    };
    assert_eq!(
        (o.defs.as_str(), o.repo.as_str(), o.requests.to_text().as_str(), o.timeout),
        ("defs", "/tmp/r", "tf num_cpus=2", Some(60.0))
    );
    assert!(o.slurm.is_some());
    let CellCall::Compute(o) =
        cell("%%compute --on slurm --detach --partition gpu --sbatch '--nice=5 --exclusive' tf num_cpus=2\nx")
    else {
        panic!()
    };
    assert_eq!(o.requests.to_text(), "tf num_cpus=2");
    assert_eq!(
        o.slurm,
        Some(crate::SlurmJob {
            detach: true,
            options: dryml::__kernel::slurm::JobOptions {
                partition: Some("gpu".into()),
                sbatch: vec!["--nice=5".into(), "--exclusive".into()],
                ..Default::default()
            }
        })
    );
    // Help asks for no call.
    assert!(parse_cell("%repo?").unwrap().line_magics[0].call.is_none());
}

mod context_args;

#[test]
fn notebook_habits() {
    // A script's and a file's body stay as written; a Rust body's `!` lines become Rust.
    let p = parse_cell("%%bash --raise-error\n!ls {x}\necho $HOME").unwrap();
    assert_eq!(p.body, "!ls {x}\necho $HOME");
    assert_eq!(p.cell_magic.unwrap().cell_call(), Some(&CellCall::Script { shell: Shell::Bash, raise_error: true }));
    let p = parse_cell("%%writefile -a 'my dir/c.toml'\n[a]\nb = 1\n").unwrap();
    assert_eq!(p.body, "[a]\nb = 1\n");
    let want = CellCall::WriteFile { append: true, path: "my dir/c.toml".into() };
    assert_eq!(p.cell_magic.unwrap().cell_call(), Some(&want));
    let p = parse_cell("%%time\n!echo hi\n1").unwrap();
    assert_eq!((p.body.lines().count(), p.magic_lines), (2, 1));
    assert!(p.body.starts_with("dryml::__kernel::shell::line(\"echo hi\");\n"), "{}", p.body);
    // `%timeit` starts the body, after the line magics; `%timeit?` is help.
    let p = parse_cell("%env A=1\n%timeit f()\n").unwrap();
    assert_eq!((p.line_magics.len(), p.magic_lines), (1, 1));
    assert!(p.body.starts_with("dryml::__kernel::timeit::line("), "{}", p.body);
    let p = parse_cell("%timeit?").unwrap();
    assert!(p.line_magics[0].help && p.line_magics[0].spec.help_text().contains("black_box"));
    let p = parse_cell("%%timeit -n 5 -r 2 -o\nf()").unwrap();
    let want = crate::timeit::TimeitOptions { number: Some(5), repeat: 2, output: true, ..Default::default() };
    assert_eq!(p.cell_magic.as_ref().unwrap().cell_call(), Some(&CellCall::Timeit(want)));
    assert!(p.body.ends_with("|| { f()\n})"), "{}", p.body);
    let p = parse_cell("%cd\n%cd ~/x\n%pwd\n%load a.rs").unwrap();
    let calls: Vec<_> = p.line_magics.iter().map(|i| i.line_call().unwrap().clone()).collect();
    let want = [LineCall::Cd(None), LineCall::Cd(Some("~/x".into())), LineCall::Pwd, LineCall::Load("a.rs".into())];
    assert_eq!(calls, want);
    // Errors name the magic and where.
    let e = parse_cell("%%timeit f()\n1").unwrap_err();
    assert!(e.message.contains("the code to time is the cell's body"), "{}", e.message);
    let e = parse_cell("%%writefile\nx").unwrap_err();
    assert!(e.message.contains("missing required argument PATH"), "{}", e.message);
    let e = parse_cell("%%bash -x\nls").unwrap_err();
    assert!(e.message.contains("unknown option `-x`"), "{}", e.message);
    let e = parse_cell("// comment\n%lsmagic").unwrap_err();
    assert_eq!((e.line, e.column), (2, 1));
    let e = parse_cell("%%time\nlet a = 1;\n!").unwrap_err();
    assert_eq!((e.line, e.column), (3, 1));
}

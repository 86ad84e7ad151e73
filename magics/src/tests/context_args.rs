//! `%context`, `%%compute` and `%%sweep` arguments: requests in text and JSON, options.

use crate::compute_args::*;
use dryml::compute::context::Requests;

fn args_of(magic: &str) -> Result<crate::Invocation, crate::MagicError> {
    crate::parse_cell(magic).map(|p| p.line_magics.into_iter().chain(p.cell_magic).next().unwrap())
}

#[test]
fn context_lines() {
    use ContextCommand::*;
    let r = |t: &str| Requests::parse(t).unwrap();
    // (line, command)
    let table: Vec<(&str, ContextCommand)> = vec![
        ("%context", Show),
        (
            "%context tf gpu/0=0.5 torch num_gpus=0",
            Set { requests: r("tf gpu/0=0.5 torch num_gpus=0"), restart: false },
        ),
        (r#"%context {"tf": {"gpu/0": 0.5}}"#, Set { requests: r("tf gpu/0=0.5"), restart: false }),
        (r#"%context --restart {"tf": {"num_cpus": 1}}"#, Set { requests: r("tf num_cpus=1"), restart: true }),
        ("%context check tf num_gpus=2", Check(r("tf num_gpus=2"))),
        (r#"%context check {"tf": {}}"#, Check(r("tf"))),
    ];
    for (line, want) in table {
        let inv = args_of(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let tokens = crate::tokenize(&inv.args.raw).unwrap();
        assert_eq!(context_command(&inv.args, &tokens).unwrap(), want, "{line}");
    }
}

#[test]
fn bad_context_lines_point_at_the_token() {
    // (line, words of the message, 1-based column of the caret)
    let table: &[(&str, &str, usize)] = &[
        ("%context tf gpu/0=1.5", "tf: gpu/0 must be a fraction in (0, 1], got 1.5", 13),
        ("%context check tf tpu/0=1", "unknown key `tpu/0`", 19),
        ("%context --restart", "--restart needs the REQS", 19),
        ("%context check", "check needs the REQS", 15),
        ("%context check --restart tf", "do not go together", 16),
        (r#"%context {"tf": {"gpu/0": 2}}"#, "(at \"tf\".\"gpu/0\")", 10),
        ("%context gpu/0=1.5", "default: gpu/0 must be a fraction in (0, 1], got 1.5", 10),
        ("%%compute tf num_gpus=x", "num_gpus must be a whole number", 14),
        ("%%compute --update a,,b", "`` is not a variable name (expected --update a,b,c)", 20),
        ("%%compute --timeout -3", "--timeout must be a positive number of seconds, got `-3`", 21),
        ("%%compute --mem-limit 12Q", "--mem-limit: `12Q`: unknown unit `Q`", 23),
        ("%%compute --frobnicate", "unknown option `--frobnicate`", 11),
    ];
    for (line, words, col) in table {
        let e = args_of(line).expect_err(line);
        assert!(e.message.contains(words), "{line}: {}", e.message);
        assert_eq!(e.column, *col, "{line}: {}", e.message);
    }
}

#[test]
fn missing_devices_point_at_their_token() {
    // (line, machine's cpus and gpus, 1-based column of the caret, words)
    let table: &[(&str, usize, usize, usize, &str)] = &[
        ("%context tf gpu/0=0.5 torch gpu/1=0.5", 2, 1, 29, "torch: gpu/1 does not exist (this machine has 1 gpu"),
        ("%context check tf cpu/4=1", 4, 0, 19, "tf: cpu/4 does not exist (this machine has 4 cpus"),
        ("%%compute --timeout 3 tf gpu/0=1", 2, 0, 26, "tf: gpu/0 does not exist"),
        (r#"%context {"tf": {"gpu/3": 1}}"#, 2, 2, 10, "tf: gpu/3 does not exist"),
    ];
    for (line, cpus, gpus, col, words) in table {
        let inv = args_of(line).unwrap();
        let tokens = crate::tokenize(&inv.args.raw).unwrap();
        let reqs = match inv.spec.kind {
            crate::MagicKind::Cell => compute_options(&inv.args, &tokens).unwrap().requests,
            crate::MagicKind::Line => match context_command(&inv.args, &tokens).unwrap() {
                ContextCommand::Set { requests, .. } | ContextCommand::Check(requests) => requests,
                ContextCommand::Show => unreachable!(),
            },
        };
        let e = inv.check_devices(&reqs, *cpus, *gpus).expect_err(line);
        assert!(e.message.contains(words), "{line}: {}", e.message);
        assert_eq!(e.column, *col, "{line}: {}", e.caret());
    }
    let inv = args_of("%context tf gpu/0=0.5").unwrap();
    assert!(inv.check_devices(&Requests::parse("tf gpu/0=0.5").unwrap(), 1, 1).is_ok());
}

#[test]
fn compute_lines() {
    let inv =
        args_of("%%compute tf gpu/0=0.5 --update model,loss --timeout 2.5 --mem-limit 1.5G -v --dont-create").unwrap();
    let tokens = crate::tokenize(&inv.args.raw).unwrap();
    let o = compute_options(&inv.args, &tokens).unwrap();
    assert_eq!(o.requests, Requests::parse("tf gpu/0=0.5").unwrap());
    assert_eq!(o.update, vec!["model", "loss"]);
    assert_eq!((o.timeout, o.mem_limit), (Some(2.5), Some(3 << 29)));
    assert!(o.verbose && o.dont_create && !o.use_existing);
    let inv = args_of("%%compute").unwrap();
    let o = compute_options(&inv.args, &[]).unwrap();
    assert_eq!(o.requests, Requests::parse("default").unwrap());
}

#[test]
fn json_and_text_forms_agree() {
    let table: &[(&str, &str)] = &[
        (r#"{"tf": {"gpu/0": 0.5}, "torch": {"num_gpus": 0}}"#, "tf gpu/0=0.5 torch num_gpus=0"),
        (r#"{"default": {}}"#, "default"),
        (r#"{"num_cpus": 2, "gpu/0": 0.5}"#, "num_cpus=2 gpu/0=0.5"),
        (r#"{"tf": {"num_gpus": 1}, "num_cpus": 2}"#, "default num_cpus=2 tf num_gpus=1"),
        (r#"{"tf": {"num_cpus": -1, "cpu/2": 1}}"#, "tf num_cpus=-1 cpu/2=1"),
    ];
    for (json, text) in table {
        assert_eq!(requests_from_json(json).unwrap(), Requests::parse(text).unwrap(), "{json}");
    }
}

#[test]
fn json_errors_name_the_place() {
    let table: &[(&str, &str)] = &[
        (r#"{"tf": {"gpu/0": 1.5}}"#, "tf: gpu/0 must be a fraction in (0, 1], got 1.5 (at \"tf\".\"gpu/0\")"),
        (r#"{"tf": {"gpu/0": "half"}}"#, "\"tf\".\"gpu/0\": expected a number, got \"half\""),
        (r#"{"tf": {"num_gpus": 1.5}}"#, "num_gpus must be a whole number"),
        (r#"{"tf": "x"}"#, "\"tf\": expected an object of keys (a framework's) or a number"),
        (r#"{"tf": 1}"#, "default: unknown key `tf`"),
        (r#"{"num_gpus": 1, "default": {}}"#, "framework `default` is given twice (at \"default\")"),
        (r#"[1]"#, "expected a JSON object of frameworks"),
        (r#"{"tf": {"#, "not valid JSON at line 1"),
        (r#"{"tf": {"tpu/0": 1}}"#, "unknown key `tpu/0`"),
    ];
    for (json, words) in table {
        let e = requests_from_json(json).expect_err(json);
        assert!(e.contains(words), "{json}: {e}");
    }
}

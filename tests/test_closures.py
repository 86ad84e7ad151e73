"""Closures kept between cells (issue 60): a `let` of a closure is stored as the trait object of
its kind and signature (`Box<dyn FnMut() -> u32>`), and later cells call it as before. A borrow
of the notebook's variables (`let r = &v;`) is made again from them in each cell that names it."""
from conftest import ok, stderr_of, stdout_of, value, wait_for


def shown(reply):
    return reply.get("evalue", "") + "\n".join(reply.get("traceback", []))


def test_closures_are_kept_and_called_in_later_cells(kernel):
    ok(kernel, "let f = |x: i32| x + 1;")
    assert value(kernel, "f(2)") == "3"
    # Capturing by move: a number, and a Vec.
    ok(kernel, "let k = 10;\nlet g = move |x: i32| x * k;")
    assert value(kernel, "g(3)") == "30"
    ok(kernel, "let v = vec![1, 2, 3];\nlet total = move || v.iter().sum::<i32>();")
    assert value(kernel, "total()") == "6"
    # FnMut: its state goes on from cell to cell.
    ok(kernel, "let mut n = 0u32;\nlet mut count = move || { n += 1; n };")
    assert [value(kernel, "count()") for _ in range(3)] == ["1", "2", "3"]
    # A kept closure captured by another.
    ok(kernel, "let twice = move |x: i32| f(f(x));")
    assert value(kernel, "twice(1)") == "3"
    # A function named without a call: kept as its pointer.
    ok(kernel, "fn quadruple(x: i32) -> i32 { x * 4 }\nlet p = quadruple;")
    assert value(kernel, "p(4)") == "16"
    # A lazy iterator whose type names a closure: kept as a boxed iterator.
    ok(kernel, "let squares = (0..5).map(|x: i32| x * x);")
    assert value(kernel, "squares.sum::<i32>()") == "30"
    ok(kernel, "let owned = vec![String::from(\"a\"), String::from(\"bc\")];\n"
               "let mut lengths = owned.into_iter().map(|s| s.len());")
    assert value(kernel, "lengths.next()") == "Some(1)"
    assert value(kernel, "lengths.next()") == "Some(2)"
    types = dict(line.split(": ", 1) for line in value(kernel, ":vars").splitlines())
    assert types["lengths"] == "Box<dyn Iterator<Item = usize>>" and types["p"] == "fn(i32) -> i32", types
    assert types["g"] == "Box<dyn Fn(i32) -> i32>" and types["count"] == "Box<dyn FnMut() -> u32>", types
    assert types["twice"] == "Box<dyn Fn(i32) -> i32>" and "f" not in types, types


def test_a_closure_that_cannot_be_kept_says_why_and_the_notebook_goes_on(kernel):
    ok(kernel, "let kept = 7u8;")
    # It borrows a value of its own cell: `move` would keep it.
    reply, _ = kernel.execute("let w = vec![1];\nlet r = || w.len();")
    assert reply["status"] == "error" and "`r` borrows a value" in shown(reply), shown(reply)
    assert "move |..|" in shown(reply), shown(reply)
    # An iterator over a borrowed Vec is a borrow of the notebook's: made again in the next cell.
    ok(kernel, "let w = vec![1];\nlet doubled = w.iter().map(|x| x * 2);")
    assert value(kernel, "doubled.sum::<i32>()") == "2"
    # Its result is a closure: no trait object can be written for it.
    reply, _ = kernel.execute("let adder = |x: i32| move |y: i32| x + y;")
    assert reply["status"] == "error" and "is a closure, which cannot be persisted" in shown(reply), shown(reply)
    assert value(kernel, "kept") == "7"
    # Redefined with the same name: the new closure.
    ok(kernel, "let h = |x: i32| x - 1;")
    ok(kernel, "let h = |x: i32| x * 100;")
    assert value(kernel, "h(2)") == "200"
    # One whose signature names a type the notebook then redefines is dropped, saying why.
    ok(kernel, "struct P(u8);\nlet make = move |x: u8| P(x);")
    assert value(kernel, "make(4).0") == "4"
    msgs = ok(kernel, "struct P(String);")
    assert "so `make` was dropped" in stderr_of(msgs), stderr_of(msgs)
    assert value(kernel, "kept") == "7"


def test_a_kept_closure_lives_through_a_dep_and_a_compute_cell(kernel, tmp_path):
    ok(kernel, "let mut total = 0i64;\nlet mut add = move |x: i64| { total += x; total };")
    assert value(kernel, "add(5)") == "5"
    # A dependency the user adds: the closure's type is std's, so it stays.
    tiny = tmp_path / "tiny"
    (tiny / "src").mkdir(parents=True)
    (tiny / "Cargo.toml").write_text('[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n')
    (tiny / "src" / "lib.rs").write_text("pub fn two() -> i64 { 2 }\n")
    ok(kernel, f':dep tiny = {{ path = "{tiny}" }}', timeout=600)
    assert value(kernel, "add(tiny::two())") == "7"
    # A sandbox gets a copy: its calls change the notebook's closure not at all.
    assert value(kernel, "%%compute default\nadd(100)", timeout=600) == "107"
    assert value(kernel, "add(1)") == "8"


def test_an_interrupt_in_a_stored_closure_keeps_it_and_the_rest(kernel):
    ok(kernel, "let held = 11u8;\nlet until_stopped = || {\n    println!(\"running\");\n"
               "    while !dryml::interrupted() { std::thread::sleep(std::time::Duration::from_millis(10)); }\n};",
       timeout=600)
    msg_id = kernel.send("execute", "until_stopped()")
    wait_for(lambda: "running" in stdout_of(kernel.progress(msg_id)), 300, "the closure to run")
    kernel.interrupt()
    reply, _ = kernel.collect(msg_id, timeout=60)
    assert reply["ename"] == "KeyboardInterrupt" and "kept" in reply["evalue"], reply
    assert value(kernel, "held") == "11"
    types = dict(line.split(": ", 1) for line in value(kernel, ":vars").splitlines())
    assert types["until_stopped"] == "Box<dyn Fn()>", types


def test_a_borrow_of_a_kept_variable_lives_on_and_guards_it(kernel):
    # Made in one cell with its variable, used in the next: made again from `v` there.
    ok(kernel, "let v = vec![1, 2, 3];\nlet r = &v;")
    assert value(kernel, "r.len()") == "3"
    # A slice, a lazy view, and a `&mut` that changes its variable.
    ok(kernel, "let tail = &v[1..];\nlet tens = v.iter().map(|x| x * 10);")
    assert value(kernel, "(tail.to_vec(), tens.sum::<i32>(), r[0])") == "([2, 3], 60, 1)"
    ok(kernel, "let mut m = vec![1];\nlet mr = &mut m;")
    ok(kernel, "mr.push(2);")
    assert value(kernel, "m") == "[1, 2]"
    # Moving what a borrow is made from: an error that names the borrow, and nothing lost.
    reply, _ = kernel.execute("let w = v;")
    assert reply["status"] == "error" and "but `r` borrows it (`let r = &v;`" in shown(reply), shown(reply)
    assert value(kernel, "(v.len(), r.len(), tail.len())") == "(3, 3, 2)"
    types = dict(line.split(": ", 1) for line in value(kernel, ":vars").splitlines())
    assert types["v"] == "Vec<i32>" and "r" not in types, "a borrow is made again, never stored"
    # A sandbox makes it from its copy of `v`.
    assert value(kernel, "%%compute default\nr.len() + tail.len()", timeout=600) == "5"
    # Let go first, then moved: the borrows are gone, the value moved.
    ok(kernel, "drop(r);\ndrop(tail);\ndrop(tens);\nlet w = v;")
    reply, _ = kernel.execute("r.len()")
    assert reply["status"] == "error" and "E0425" in shown(reply), shown(reply)
    assert value(kernel, "w.len()") == "3"
    # A borrow whose variable is dropped by a redefined type goes with it, saying so.
    ok(kernel, "struct Q(u8);\nlet q = Q(1);\nlet qr = &q.0;")
    assert value(kernel, "*qr") == "1"
    msgs = ok(kernel, "struct Q(u16);")
    assert "`qr` (let qr = &q.0;) is gone" in stderr_of(msgs), stderr_of(msgs)

"""The official jupyter_kernel_test suite, with a sample for every test it has."""
import unittest

import jupyter_kernel_test as jkt
from jupyter_client.manager import start_new_kernel


class DrymlRustKernelTests(jkt.KernelTests):
    kernel_name = "dryml-rust"
    language_name = "rust"
    file_extension = ".rs"

    @classmethod
    def setUpClass(cls):
        cls.km, cls.kc = start_new_kernel(kernel_name=cls.kernel_name, startup_timeout=120)
        # The first use of the dryml crate compiles it; do that outside the suite's 15 s limits.
        cls.kc.execute_interactive('dryml::html("<i>warm</i>")', timeout=300)

    code_hello_world = 'println!("hello, world")'
    code_stderr = 'eprintln!("to stderr")'

    completion_samples = [
        {"text": "%lsm", "matches": ["%lsmagic"]},
        {"text": "%%ti", "matches": ["%%time", "%%timeit"]},
        {"text": "String::new().len"},
    ]

    complete_code_samples = ["let x = 1;", "fn f() -> i32 { 1 }", "1 + 1", ":vars", "%lsmagic"]
    incomplete_code_samples = ["fn f() {", "let v = vec![1,", "let s = \"open", "let y = 1 +"]
    invalid_code_samples = ["}", "let a = (1, 2];"]

    code_page_something = "%env?"

    code_generate_error = 'let x: i32 = "not a number";'

    code_execute_result = [
        {"code": "6 * 7", "result": "42"},
        {"code": "\"dryml\".len()", "result": "5"},
        {"code": "vec![1, 2]", "result": "[1, 2]"},
        {"code": "dryml::Html(\"<b>x</b>\".to_string())", "mime": "text/html", "result": "<b>x</b>"},
    ]

    code_display_data = [
        {"code": 'dryml::html("<b>shown</b>")', "mime": "text/html"},
        {"code": 'dryml::display::display(&[("text/plain", "plain")], dryml::display::Update::New)', "mime": "text/plain"},
    ]

    code_history_pattern = "6 ? 7"
    supported_history_operations = ("tail", "range", "search")

    code_inspect_sample = "%%time"

    code_clear_output = 'println!("gone"); dryml::clear_output(false);'


class DrymlRustWelcomeTests(jkt.IopubWelcomeTests):
    kernel_name = "dryml-rust"
    support_iopub_welcome = True


if __name__ == "__main__":
    unittest.main()

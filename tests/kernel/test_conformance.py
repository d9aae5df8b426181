"""The tapedeck kernel against jupyter_kernel_test: every reply validated against the Jupyter
messaging spec (v5), for execute, stdout/stderr, errors, results, display data, completion,
inspection, is_complete and history.

    python3 tests/kernel/test_conformance.py build/tapedeck
"""
import sys
import unittest

from kernel_env import finish, install_kernelspec, skip

if __name__ == "__main__":
    install_kernelspec(sys.argv[1])
    try:
        import jupyter_kernel_test
    except ImportError:
        skip("no jupyter_kernel_test (Debian: python3-jupyter-kernel-test)")

    class TapedeckKernelTests(jupyter_kernel_test.KernelTests):
        kernel_name = "tapedeck"
        language_name = "lua"
        file_extension = ".lua"
        code_hello_world = 'print("hello, world")'
        code_stderr = 'io.stderr:write("oops\\n")'
        code_generate_error = 'error("boom")'
        code_execute_result = [
            {"code": "6 * 7", "result": "42"},
            {"code": "x = torch.tensor{1, 2, 3}\nx:sum()", "result": "tensor(6.)"},
            {"code": "local t = {}\nfor i = 1, 3 do t[i] = i * i end\nt[3]", "result": "9"},
        ]
        code_display_data = [
            {"code": "a = torch.randn(2, 2, {requires_grad = true})\nb = (a * 2):sum()\n:graph b", "mime": "image/svg+xml"},
            {"code": ":graph b", "mime": "text/plain"},
        ]
        completion_samples = [
            {"text": "torch.mat", "matches": {"torch.matmul"}},
            {"text": ":gra", "matches": {":graph", ":gradcheck"}},
        ]
        complete_code_samples = ["1 + 1", "x = 1", "for i = 1, 3 do print(i) end", ":graph", "print(1)\n:graph"]
        incomplete_code_samples = ["for i = 1, 3 do", "function f(x)", "t = {1, 2,", "s = [[a"]
        invalid_code_samples = ["x = = 1", "1 +* 2", "end end"]
        code_inspect_sample = "torch.matmul"
        code_history_pattern = "6 * 7"
        supported_history_operations = ("tail", "range", "search")

        def test_tensor_result_is_html(self):
            """A tensor's result has its HTML table beside the text PyTorch prints."""
            self.flush_channels()
            reply, outputs = self.execute_helper("torch.tensor{{1, -2}, {3, 4}}")
            self.assertEqual(reply["content"]["status"], "ok")
            results = [m for m in outputs if m["msg_type"] == "execute_result"]
            self.assertEqual(len(results), 1)
            data = results[0]["content"]["data"]
            self.assertIn("tensor([[ 1., -2.],", data["text/plain"])
            self.assertIn("<table>", data["text/html"])
            self.assertIn("<svg", data["text/html"])   # the heatmap

        def test_freeze_tables(self):
            """:plan and :timeit show as tables (text/html) beside the terminal's text."""
            self.flush_channels()
            self.execute_helper("f = torch.freeze(function(x) return (x * 2):tanh():sum() end, torch.randn(8))")
            for command, words in ((":plan f", "nodes recorded"), (":timeit f 20", "median")):
                reply, outputs = self.execute_helper(command)
                shown = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
                self.assertEqual(len(shown), 1, command)
                self.assertIn("<table>", shown[0]["text/html"], command)
                self.assertIn(words, shown[0]["text/html"], command)

        def test_native_source_and_timeit(self):
            """:plan f --source prints the native C++ in a cell; :timeit's table gains a native row."""
            self.flush_channels()
            self.execute_helper("g = torch.freeze{function(x) return (x * 2):tanh():sum() end, torch.randn(8), "
                                "name = 'g', native = true}")
            reply, outputs = self.execute_helper(":plan g --source")
            printed = "".join(m["content"]["text"] for m in outputs
                              if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
            self.assertIn('extern "C" void td_segment_1', printed)
            self.assertIn("math::tanh(x)", printed)   # elementwise.def's line, stringised
            reply, outputs = self.execute_helper(":timeit g 20")
            shown = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
            self.assertEqual(len(shown), 1)
            self.assertIn("<th>native</th>", shown[0]["text/html"])
            self.assertIn("native", shown[0]["text/plain"])

        def test_error_names_cell_and_line(self):
            self.flush_channels()
            reply, outputs = self.execute_helper("local a = 1\nlocal b = a + nil", stop_on_error=False)
            self.assertEqual(reply["content"]["status"], "error")
            self.assertRegex(reply["content"]["evalue"], r"^cell \d+, line 2: attempt to perform arithmetic on a nil value")

    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    finish(not result.wasSuccessful())

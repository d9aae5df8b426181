// npy.h: tensors as NumPy .npy files, and reading a whole file into memory for the loaders.
//
// The loaders take bytes in memory (npy_load_bytes, plan_load_bytes in plan.h) so that a fuzzer can
// feed them anything; the file functions are thin wrappers that read the file first.
#pragma once

#include <string>

#include "file_whole.h"
#include "tensor.h"

namespace td {

// Write `value` as a format 1.0 .npy file, C order, little-endian ('<f4', '<f8' or '<i8'); a
// view's elements in row-major order.
void npy_save(const Value& value, const std::string& path);
// The bytes npy_save writes (for the .npz writer).
std::string npy_bytes_of(const Value& value);
// The bytes of a .npy file holding one string, a 0-d array as numpy.save writes a Python str:
// '<Un' (n UTF-32 code points) when `text` is UTF-8, else '|Sn' (the bytes as they are). A text
// that ends with a NUL byte is an error naming `function` (NumPy drops trailing NULs).
std::string npy_bytes_of_string(const std::string& text, const char* function);
// Whether `text` is well-formed UTF-8.
bool utf8_valid(const std::string& text);

// Read a .npy file (format 1.0, 2.0 or 3.0; C or Fortran order, a Fortran-order array read into
// row-major order as NumPy reads it; either byte order). float32, float64 and
// int64 load as they are; float16 loads as float32; bool, int8..int32 and uint8..uint64 as int64
// (a uint64 above 2^63-1 is an error). The header must be the dict NumPy writes: exactly the keys
// 'descr', 'fortran_order' and 'shape', the shape a tuple of non-negative decimal integers whose
// element count fits; the data exactly as long as the shape says. Every error names load_npy and
// the file, and nothing is accepted silently.
Value npy_load(const std::string& path);
// The same from the file's bytes in memory; `name` stands for the file in messages.
Value npy_load_bytes(const std::string& bytes, const std::string& name);

// What a .npy file holds: an array of numbers (as npy_load reads it), or one string (a 0-d array
// of dtype 'U' or 'S', read as NumPy reads it: trailing NULs dropped, UTF-32 as UTF-8).
struct NpyContent {
    Value tensor;          // when !is_string
    bool is_string = false;
    std::string text;      // when is_string
};
// npy_load_bytes, also taking one string; errors start with "<function>: <name>: ". An array
// of strings, and an array of Python objects (a pickle), are errors.
NpyContent npy_parse_bytes(const std::string& bytes, const std::string& name, const char* function);

}  // namespace td

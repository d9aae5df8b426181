// lua_source_text.h: what the user wrote, read back from the script's line, for messages in the
// user's terms (freeze's guards: `b:norm() > 1000`, not `1000 < #20122`).
#pragma once

#include <string>

#include "tape.h"

namespace tdlua {

// The comparison (<, <=, >, >=) written on line `where`, as written ("b:norm() > 1000"), when
// the line holds exactly one; "" otherwise (none, several, or no readable source).
std::string source_comparison(td::SourceLoc where);
// The call of `method` written on line `where` with its receiver ("loss:sum():item()" for
// "item"), when the line calls it exactly once as x:method(); "" otherwise.
std::string source_method_call(td::SourceLoc where, const char* method);

}  // namespace tdlua

// kernel_docs.h: what Shift-Tab shows in a notebook (inspect_request): a function's signature and
// its line of docs, from docs/lua_api.md (compiled into the program, so the notebook and the docs
// say the same), with the op's math from the op table.
#pragma once

#include <string>

struct lua_State;

// The text for `word` ("torch.mm", "x:sum", "nn.Linear", "F.relu", "mm"); empty when the docs
// name nothing by it. Never runs user code.
std::string kernel_docs_for(lua_State* L, const std::string& word);

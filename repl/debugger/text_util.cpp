// text_util.cpp: the small text helpers the debugger's and the REPL's command parsers share.
#include "text_util.h"

std::string text_trim(const std::string& text) {
    size_t a = text.find_first_not_of(" \t"), b = text.find_last_not_of(" \t");
    return a == std::string::npos ? "" : text.substr(a, b - a + 1);
}

std::vector<std::string> text_split_words(const std::string& text, const char* separators) {
    std::vector<std::string> words;
    for (size_t i = 0; i < text.size();) {
        size_t end = text.find_first_of(separators, i);
        if (end == std::string::npos) end = text.size();
        if (end > i) words.push_back(text.substr(i, end - i));
        i = end + 1;
    }
    return words;
}

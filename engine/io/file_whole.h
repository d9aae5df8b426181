// file_whole.h: every file tapedeck writes for the user is written whole or not at all, and every
// file it loads is read by its real size.
//
// Writing (file_write_whole): the bytes go to a temporary file in the target's folder (an unnamed
// O_TMPFILE where the filesystem has them, else ".<name>.tmp-<pid>-<n>"), which is flushed and
// fsync'ed, then renamed over the target, then the folder is fsync'ed. A full disk, a file-size
// limit or any other error removes the temporary file and leaves the previous file as it was; a
// kill leaves the old file or the whole new one, never a part. A named temporary file a killed
// process left behind is removed by the next save to the same target (when its process is gone).
// The new file gets the old one's permission bits, or a normal new file's (0666 less the umask);
// a file the user may not write is refused as a write in place would refuse it; a symbolic link
// is followed (the file it points to is replaced, the link stays); a hard link to the old file
// keeps the old file.
//
// Reading (file_read_bytes): only a regular file is read; a directory, a device (/dev/zero), a
// fifo or a socket is refused by its type and name before it is opened for reading, and exactly
// the file's size is read, never more than `max_bytes`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace td {

// Writes `bytes` to `path` as described above. An error names `function` ("torch.save"), the file
// and the reason ("No space left on device"), and says when the file there is unchanged (a null
// `function`: the message starts at "cannot write", for a caller that adds its own name). A target
// that exists and is not a regular file (a directory, /dev/null, a fifo) is refused by its type.
void file_write_whole(const std::string& path, std::string_view bytes, const char* function);

// The whole regular file at `path`. An error naming `function` ("load_npy") and the file when it
// cannot be opened, is not a regular file (its type named), is larger than `max_bytes`, or changes
// size while it is read.
std::string file_read_bytes(const std::string& path, const char* function, size_t max_bytes);

// "64.0 MB", "8.00 GB", "512 bytes": a size for a message.
std::string bytes_text(size_t bytes);

}  // namespace td

// display_watch.cpp: a lost X connection (the X server stopped, an ssh -X connection dropped)
// closes the viewer instead of ending the process.
//
// By default Xlib's I/O error handling prints a message and calls exit() from inside whatever X
// call noticed (glfwPollEvents, a buffer swap): static destructors then run under a frame that is
// still drawing, with the engine mid-op. libX11 1.8 (Debian 12) lets a program install an "exit
// handler" that returns instead: the connection is marked dead, and every later Xlib call on it
// does nothing. The viewer checks display_lost() after its GLFW calls and closes the window.
//
// Kept in its own file: <X11/Xlib.h> defines macros (None, Bool, Status, Success) that collide
// with the rest of the viewer's code.
#include <X11/Xlib.h>

#include "viewer_internal.h"

// As <GLFW/glfw3native.h> declares it (GLFW_EXPOSE_NATIVE_X11); that header also includes
// Xrandr's, which nothing here needs.
extern "C" Display* glfwGetX11Display(void);

namespace td {

namespace {

#ifdef TAPEDECK_HAVE_X_IO_ERROR_EXIT_HANDLER

// Xlib calls this first, with the connection already marked broken. Returning is allowed; the
// default handler would print a two-line "XIO: fatal IO error" report: the viewer prints its own.
int on_x_io_error(Display*) {
    viewer_state().app.display_lost = true;
    return 0;
}

// Then this, instead of exit(1). Returning keeps the process (and the script) going.
void on_x_io_error_exit(Display*, void*) { viewer_state().app.display_lost = true; }
#endif

}  // namespace

bool display_watch_install() {
#ifdef TAPEDECK_HAVE_X_IO_ERROR_EXIT_HANDLER
    Display* display = glfwGetX11Display();
    if (!display) return false;
    XSetIOErrorHandler(on_x_io_error);
    XSetIOErrorExitHandler(display, on_x_io_error_exit, nullptr);
    return true;
#else
    return false;   // libX11 < 1.8: an X I/O error still ends the process, after Xlib's message
#endif
}

bool display_lost() { return viewer_state().app.display_lost.load(); }

}  // namespace td

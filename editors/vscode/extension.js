// tapedeck's debugger in VS Code: the debug type "tapedeck" runs `tapedeck --dap` (the DAP server,
// docs/debugger.md "In an editor") for each session. Nothing else: the server does the debugging.
const vscode = require("vscode");

function activate(context) {
  context.subscriptions.push(vscode.debug.registerDebugAdapterDescriptorFactory("tapedeck", {
    createDebugAdapterDescriptor(session) {
      const program = session.configuration.tapedeck || "tapedeck";
      return new vscode.DebugAdapterExecutable(program, ["--dap"]);
    },
  }));
}

module.exports = { activate, deactivate() {} };

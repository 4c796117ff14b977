-- Options of the jp plugin: defaults, and what `require("jp").setup{}` changed.
local M = {}

M.defaults = {
  -- The daemon command; `--listen <socket>` is appended when no daemon answers.
  daemon_cmd = { "jpd" },
  -- The daemon's socket; nil: $JP_SOCKET, else <runtime dir>/jp/jpd.sock (as `jp` uses).
  socket = nil,
  -- Milliseconds to wait for a daemon this plugin started to listen.
  start_timeout = 15000,
  -- Milliseconds to wait for the answer to a request such as turn/start.
  request_timeout = 15000,
  -- Where a conversation buffer opens: "vertical", "horizontal", "tab" or "current".
  split = "vertical",
  -- Width (vertical) or height (horizontal) of the split; nil: Neovim's default.
  split_size = nil,
  -- Model id (`<provider>/<model>`) for turns started here; nil: the daemon's default.
  model = nil,
  -- Permission mode of turns started here (`:JpMode`): "ask", "accept-edits", "auto"
  -- or "read-only"; nil: "ask".
  mode = nil,
  -- Where the plugin remembers each workspace's conversation; nil: stdpath("data")/jp.
  state_dir = nil,
  -- "[user@]HOST[:/path]": use the daemon of HOST over ssh (`ssh HOST jp proxy`), with
  -- /path as the workspace there; nil: the local daemon. The remote machine's config,
  -- keys and data are used; Neovim's directory is not sent (it is a path of this machine).
  remote = nil,
  -- The ssh command for `remote` (a list), and the `jp` command on the remote machine.
  ssh_cmd = { "ssh" },
  remote_jp = "jp",
}

M.options = vim.deepcopy(M.defaults)

--- Merge user options over the defaults.
function M.setup(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
end

return M

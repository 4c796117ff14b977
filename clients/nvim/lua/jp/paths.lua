-- Where the shared daemon listens, computed as `jp` computes it (see clients/jpcli/paths.py).
local config = require("jp.config")

local M = {}

local function private_dir(path)
  local st = vim.uv.fs_lstat(path)
  return st ~= nil and st.type == "directory" and st.uid == vim.uv.getuid()
    and bit.band(st.mode, 511) == 448 -- 0700
end

--- The user runtime dir of jp: $XDG_RUNTIME_DIR/jp, else /run/user/<uid>/jp, else a tmp dir.
function M.runtime_dir()
  local xdg = vim.env.XDG_RUNTIME_DIR or ""
  if xdg:sub(1, 1) == "/" then
    local st = vim.uv.fs_lstat(xdg)
    if st == nil or private_dir(xdg) then
      return xdg .. "/jp"
    end
  end
  local default = "/run/user/" .. vim.uv.getuid()
  if private_dir(default) then
    return default .. "/jp"
  end
  local tmp = vim.env.TMPDIR or "/tmp"
  return tmp .. "/runtime-" .. vim.uv.getuid() .. "/jp"
end

--- An absolute path without a trailing slash, as Python's os.path.abspath(expanduser(p)).
local function absolute(path)
  path = vim.fn.expand(path)
  if path:sub(1, 1) ~= "/" then
    path = vim.fn.getcwd() .. "/" .. path
  end
  path = vim.fs.normalize(path)
  return #path > 1 and path:gsub("/+$", "") or path
end

--- <XDG_DATA_HOME or ~/.local/share>/jp: the data dir `jpd` uses by default.
function M.default_data_dir()
  local data = vim.env.XDG_DATA_HOME or ""
  if data:sub(1, 1) ~= "/" then
    data = vim.fn.expand("~/.local/share")
  end
  return data .. "/jp"
end

--- The socket to use: the `socket` option, else $JP_SOCKET, else the runtime dir's
--- jpd.sock, or jpd-<hash>.sock for a $JP_DATA_DIR other than the default (each data
--- dir has a daemon of its own: the rule of `jp` and `jpd`, clients/jpcli/paths.py).
function M.socket()
  if config.options.socket and config.options.socket ~= "" then
    return config.options.socket
  end
  local env = vim.trim(vim.env.JP_SOCKET or "")
  if env ~= "" then
    return env
  end
  local name = "jpd.sock"
  local data = vim.trim(vim.env.JP_DATA_DIR or "")
  if data ~= "" then
    local path = absolute(data)
    if path ~= absolute(M.default_data_dir()) then
      name = "jpd-" .. vim.fn.sha256(path):sub(1, 12) .. ".sock"
    end
  end
  return M.runtime_dir() .. "/" .. name
end

--- Why the socket `path` or its folder is not the user's own, or nil (as `jp` checks,
--- clients/jpcli/peer.py; the peer's uid is not checked here: libuv does not expose
--- SO_PEERCRED). `uid` defaults to the user's: tests pass another.
function M.socket_problem(path, uid)
  uid = uid or vim.uv.getuid()
  local st = vim.uv.fs_lstat(path)
  local folder = vim.fs.dirname(path)
  local fst = vim.uv.fs_stat(folder)
  if st == nil or fst == nil then
    return "cannot check " .. path
  end
  if st.type ~= "socket" then
    return path .. " is not a socket"
  end
  if st.uid ~= uid then
    return ("%s belongs to uid %d, not %d"):format(path, st.uid, uid)
  end
  if fst.uid ~= uid then
    return ("its folder %s belongs to uid %d, not %d"):format(folder, fst.uid, uid)
  end
  if bit.band(fst.mode, 18) ~= 0 then -- 0o022
    return ("its folder %s can be written by other users"):format(folder)
  end
  return nil
end

--- Where the plugin keeps its small state file (workspace -> conversation).
function M.state_file()
  local dir = config.options.state_dir or (vim.fn.stdpath("data") .. "/jp")
  return dir .. "/workspaces.json"
end

return M

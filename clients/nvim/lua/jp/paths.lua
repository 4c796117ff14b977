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

--- The socket to use: the `socket` option, else $JP_SOCKET, else the runtime dir's jpd.sock.
function M.socket()
  if config.options.socket and config.options.socket ~= "" then
    return config.options.socket
  end
  local env = vim.trim(vim.env.JP_SOCKET or "")
  if env ~= "" then
    return env
  end
  return M.runtime_dir() .. "/jpd.sock"
end

--- Where the plugin keeps its small state file (workspace -> conversation).
function M.state_file()
  local dir = config.options.state_dir or (vim.fn.stdpath("data") .. "/jp")
  return dir .. "/workspaces.json"
end

return M

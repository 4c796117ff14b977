-- Which conversation each workspace (Neovim's current directory) continues.
local paths = require("jp.paths")

local M = {}

local function read()
  local file = paths.state_file()
  local fd = io.open(file, "r")
  if fd == nil then
    return {}
  end
  local text = fd:read("*a")
  fd:close()
  local ok, data = pcall(vim.json.decode, text)
  return (ok and type(data) == "table") and data or {}
end

--- The conversation id of `root`, if one was used there.
function M.get(root)
  return read()[root]
end

--- Remember `conversation_id` as the conversation of `root`.
function M.set(root, conversation_id)
  local data = read()
  data[root] = conversation_id
  local file = paths.state_file()
  vim.fn.mkdir(vim.fn.fnamemodify(file, ":h"), "p", "0o700")
  local tmp = file .. ".tmp"
  local fd = assert(io.open(tmp, "w"))
  fd:write(vim.json.encode(data))
  fd:close()
  vim.uv.fs_rename(tmp, file)
end

return M

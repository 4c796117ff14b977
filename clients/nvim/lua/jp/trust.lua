-- Workspace config trust, as `jp trust` keeps it (clients/jpcli/trust.py): the daemon
-- ignores <cwd>/.jp/config.toml until its key (the workspace's real path plus
-- /.jp/config.toml) and sha256 are in $JP_STATE_DIR/trusted.json (default
-- <XDG_STATE_HOME or ~/.local/state>/jp/). One that links outside the workspace is
-- never used, so never offered.
local M = {}

local function key(path)
  local folder = vim.fs.dirname(path)
  local ws = vim.fs.dirname(folder)
  return (vim.uv.fs_realpath(ws) or ws) .. "/" .. vim.fs.basename(folder) .. "/" .. vim.fs.basename(path)
end

--- Whether `path` (or its `.jp` folder) links outside its workspace.
function M.outside(path)
  local folder = vim.fs.dirname(path)
  local dir, file = vim.uv.fs_lstat(folder), vim.uv.fs_lstat(path)
  if not ((dir and dir.type == "link") or (file and file.type == "link")) then
    return false
  end
  local real, ws = vim.uv.fs_realpath(path), vim.uv.fs_realpath(vim.fs.dirname(folder))
  return real == nil or ws == nil or real:sub(1, #ws + 1) ~= ws .. "/"
end

function M.store_path()
  local explicit = vim.trim(vim.env.JP_STATE_DIR or "")
  if explicit ~= "" then
    return vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(explicit), ":p")):gsub("/+$", "")
      .. "/trusted.json"
  end
  local state = vim.env.XDG_STATE_HOME or ""
  if state:sub(1, 1) ~= "/" then
    state = vim.fn.expand("~/.local/state")
  end
  return state .. "/jp/trusted.json"
end

--- The workspace config the daemon reads for this Neovim (its cwd is the workspace root).
function M.workspace_config(cwd)
  return (cwd or vim.fn.getcwd()) .. "/.jp/config.toml"
end

local function read(path)
  local file = io.open(path, "rb")
  if not file then
    return nil
  end
  local data = file:read("*a")
  file:close()
  return data
end

local function store(name)
  local path = M.store_path()
  if name then
    path = vim.fs.dirname(path) .. "/" .. name
  end
  local ok, data = pcall(vim.json.decode, read(path) or "")
  return (ok and type(data) == "table") and data or {}
end

--- Whether the agent (a tool of the daemon) wrote `path` as it is now.
function M.agent_wrote(path)
  local content = read(path)
  return content ~= nil and store("agent-written.json")[key(path)] == vim.fn.sha256(content)
end

--- Whether `path` exists and is not trusted as it is now.
function M.untrusted(path)
  if M.outside(path) then
    return false
  end
  local content = read(path)
  if content == nil then
    return false
  end
  return store()[key(path)] ~= vim.fn.sha256(content)
end

--- Trust `path` as it is now (the store is replaced atomically).
function M.trust(path)
  if M.outside(path) then
    return false
  end
  local content = read(path)
  if content == nil then
    return false
  end
  local data = store()
  data[key(path)] = vim.fn.sha256(content)
  local target = M.store_path()
  vim.fn.mkdir(vim.fs.dirname(target), "p", "0o700")
  local temp = target .. ".nvim-" .. vim.uv.os_getpid()
  local file = assert(io.open(temp, "wb"))
  file:write(vim.json.encode(data))
  file:close()
  return vim.uv.fs_rename(temp, target) ~= nil
end

--- Ask once per file and session: "Trust this workspace's config?" (vim.ui.select).
local asked = {}
function M.offer(done)
  local path = M.workspace_config()
  if asked[path] or not M.untrusted(path) then
    return done()
  end
  asked[path] = true
  local by = M.agent_wrote(path) and "THE AGENT WROTE IT; " or ""
  vim.ui.select({ "Trust it", "Ignore it" }, {
    prompt = ("[jp] Trust this workspace's config? %s (%signored until trusted)"):format(path, by),
  }, function(choice)
    if choice == "Trust it" then
      M.trust(path)
    end
    done()
  end)
end

return M

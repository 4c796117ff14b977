-- Workspace config trust, as `jp trust` keeps it (clients/jpcli/trust.py): the daemon
-- ignores <cwd>/.jp/config.toml until its real path and sha256 are in
-- $JP_STATE_DIR/trusted.json (default <XDG_STATE_HOME or ~/.local/state>/jp/).
local M = {}

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

local function store()
  local ok, data = pcall(vim.json.decode, read(M.store_path()) or "")
  return (ok and type(data) == "table") and data or {}
end

--- Whether `path` exists and is not trusted as it is now.
function M.untrusted(path)
  local content = read(path)
  if content == nil then
    return false
  end
  local real = vim.uv.fs_realpath(path) or path
  return store()[real] ~= vim.fn.sha256(content)
end

--- Trust `path` as it is now (the store is replaced atomically).
function M.trust(path)
  local content = read(path)
  if content == nil then
    return false
  end
  local data = store()
  data[vim.uv.fs_realpath(path) or path] = vim.fn.sha256(content)
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
  vim.ui.select({ "Trust it", "Ignore it" }, {
    prompt = ("[jp] Trust this workspace's config? %s (ignored until trusted)"):format(path),
  }, function(choice)
    if choice == "Trust it" then
      M.trust(path)
    end
    done()
  end)
end

return M

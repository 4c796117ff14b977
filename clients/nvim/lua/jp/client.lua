-- The connection to the shared jpd daemon: its Unix socket, started when none answers,
-- spoken to with Neovim's own JSON-RPC client (`vim.lsp.rpc`, Content-Length framing).
local config = require("jp.config")
local paths = require("jp.paths")

local M = {}

local PROTOCOL_VERSION = 1
M.VERSION = "0.1.0"
M.ANSWER_TYPES = { "boolean", "select", "text", "secret" }

local state = {
  rpc = nil, -- vim.lsp.rpc.PublicClient
  root = nil, -- the workspaceRoot sent in the last initialize
  notification = {}, -- method -> fun(params)
  request = {}, -- method -> fun(params): result, err (may yield)
}

--- True when something accepts connections on the Unix socket `path`.
local function accepts(path)
  if vim.uv.fs_stat(path) == nil then
    return false
  end
  local pipe = vim.uv.new_pipe(false)
  local done, ok = false, false
  pipe:connect(path, function(err)
    ok, done = err == nil, true
  end)
  vim.wait(2000, function()
    return done
  end, 5)
  pipe:close()
  return ok
end

local function start_daemon(path)
  local cmd = vim.deepcopy(config.options.daemon_cmd)
  vim.list_extend(cmd, { "--listen", path })
  local exited = nil
  local ok, job = pcall(vim.fn.jobstart, cmd, {
    detach = true,
    on_exit = function(_, code)
      exited = code
    end,
  })
  if not ok or job <= 0 then
    error("jp: cannot start the daemon (" .. table.concat(cmd, " ") .. ")", 0)
  end
  local deadline = vim.uv.now() + config.options.start_timeout
  while vim.uv.now() < deadline do
    if accepts(path) then
      return
    end
    if exited ~= nil then
      error(("jp: the daemon exited with code %d before listening on %s"):format(exited, path), 0)
    end
    vim.wait(50)
  end
  error("jp: the daemon did not listen on " .. path .. " in time", 0)
end

local function dispatchers()
  return {
    notification = function(method, params)
      -- Called from the reader; handlers touch buffers, so they run on the main loop.
      vim.schedule(function()
        local handler = state.notification[method]
        if handler then
          handler(params)
        end
      end)
    end,
    server_request = function(method, params)
      -- Runs in a coroutine (vim.lsp.rpc): a handler may yield until the user answers.
      local handler = state.request[method]
      if handler == nil then
        return nil, vim.lsp.rpc.rpc_response_error(-32601, "jp.nvim does not handle " .. method)
      end
      return handler(params)
    end,
    on_exit = function()
      state.rpc, state.root = nil, nil
      vim.schedule(function()
        local handler = state.notification["$/disconnected"]
        if handler then
          handler({})
        end
      end)
    end,
    on_error = function() end,
  }
end

--- Register a handler for a notification from the daemon (e.g. "turn/event").
function M.on_notification(method, handler)
  state.notification[method] = handler
end

--- Register a handler for a request from the daemon (e.g. "inquiry/prompt").
function M.on_request(method, handler)
  state.request[method] = handler
end

--- Send a request; `callback(err, result)` runs on the main loop.
function M.request(method, params, callback)
  local rpc = M.connect()
  local ok = rpc.request(method, params or vim.empty_dict(), function(err, result)
    callback(err, result)
  end)
  if not ok then
    callback({ code = -32099, message = "the connection to jpd is closed" }, nil)
  end
end

--- Send a request and wait for its result; raises the daemon's error message.
function M.request_sync(method, params, timeout)
  local done, err, result = false, nil, nil
  M.request(method, params, function(e, r)
    done, err, result = true, e, r
  end)
  if not vim.wait(timeout or config.options.request_timeout, function()
    return done
  end, 5) then
    error("jp: " .. method .. " got no answer from the daemon", 0)
  end
  if err ~= nil then
    error("jp: " .. (err.message or vim.inspect(err)), 0)
  end
  return result
end

--- Send a notification.
function M.notify(method, params)
  M.connect().notify(method, params or vim.empty_dict())
end

local function initialize(rpc, root)
  local params = {
    protocolVersion = PROTOCOL_VERSION,
    clientInfo = { name = "jp.nvim", version = M.VERSION },
    capabilities = { prompt = { answerTypes = M.ANSWER_TYPES }, permission = true },
    workspaceRoot = root ~= "" and root or nil,
  }
  local done, err = false, nil
  rpc.request("initialize", params, function(e)
    done, err = true, e
  end)
  if not vim.wait(config.options.request_timeout, function()
    return done
  end, 5) then
    error("jp: the daemon did not answer initialize", 0)
  end
  if err ~= nil then
    error("jp: initialize failed: " .. (err.message or ""), 0)
  end
  rpc.notify("initialized", vim.empty_dict())
  state.root = root
end

--- The open connection, connecting (and starting the daemon) if needed. The workspace
--- root the daemon uses for config and tools is Neovim's current directory: when it
--- changed since the last `initialize`, the client initializes again.
--- The `remote` option split into (host, path or ""); nil when there is none.
function M.remote()
  local spec = vim.trim(config.options.remote or "")
  if spec == "" then
    return nil
  end
  local host, path = spec:match("^([^:]+):?(.*)$")
  -- ssh would read a leading "-" as an option: refuse it rather than run it.
  if host == nil or host:sub(1, 1) == "-" or host:find("[%s'\"`$;|&<>\\]") then
    error("jp: invalid remote " .. vim.inspect(spec) .. " (expected [user@]HOST[:/path])", 0)
  end
  if path ~= "" and path:sub(1, 1) ~= "/" then
    error("jp: the remote workspace must be an absolute path, got " .. path, 0)
  end
  return host, path
end

--- A connection through `ssh HOST jp proxy` (the remote daemon is started there if needed).
local function connect_remote(host)
  local cmd = vim.deepcopy(config.options.ssh_cmd)
  vim.list_extend(cmd, { "-T", "--", host, config.options.remote_jp .. " proxy" })
  local ok, rpc = pcall(vim.lsp.rpc.start, cmd, dispatchers())
  if not ok then
    error("jp: cannot run " .. table.concat(cmd, " ") .. ": " .. tostring(rpc), 0)
  end
  return rpc
end

function M.connect()
  local host, remote_path = M.remote()
  -- Over ssh the workspace is the remote path (Neovim's directory is this machine's).
  local root = host ~= nil and remote_path or vim.fn.getcwd()
  if host ~= nil then
    if state.rpc ~= nil and not state.rpc.is_closing() then
      return state.rpc
    end
    local rpc = connect_remote(host)
    state.rpc = rpc
    initialize(rpc, root)
    return rpc
  end
  if state.rpc ~= nil and not state.rpc.is_closing() then
    if state.root ~= root then
      initialize(state.rpc, root)
    end
    return state.rpc
  end
  local path = paths.socket()
  if not accepts(path) then
    start_daemon(path)
  end
  local refused = paths.socket_problem(path)
  if refused ~= nil then
    error("jp: refusing to talk to jpd on " .. path .. ": " .. refused, 0)
  end
  local rpc = vim.lsp.rpc.connect(path)(dispatchers())
  state.rpc = rpc
  initialize(rpc, root)
  return rpc
end

--- Close the connection (the daemon and its turns keep running).
function M.disconnect()
  if state.rpc ~= nil then
    state.rpc.terminate()
    state.rpc, state.root = nil, nil
  end
end

return M

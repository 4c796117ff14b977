-- jp.nvim: ask the shared jpd daemon from Neovim. See `:help jp`.
local client = require("jp.client")
local config = require("jp.config")
local prompt = require("jp.prompt")
local view = require("jp.view")
local workspaces = require("jp.workspaces")

local M = {}

local early = {} -- conversation id -> events that arrived before we knew the conversation
local starting = 0 -- turn/start requests without an answer yet

local function notify_error(message)
  vim.notify(tostring(message), vim.log.levels.ERROR)
end

local known = {} -- conversation ids shown in this Neovim

local function on_turn_event(params)
  local id = params.conversationId
  if early[id] ~= nil then
    table.insert(early[id], params)
  elseif known[id] then
    view.get(id):turn_event(params)
  elseif starting > 0 then
    -- Possibly the new conversation of a turn/start whose answer has not arrived yet.
    early[id] = { params }
  end
end

local registered = false
local function register()
  if registered then
    return
  end
  registered = true
  client.on_notification("turn/event", on_turn_event)
  client.on_notification("inquiry/resolved", prompt.resolved)
  client.on_notification("turn/lagged", function(params)
    -- This Neovim fell behind and was unsubscribed (protocol.md 7.3): re-attach from
    -- where it stopped; events already shown are skipped by their seq.
    if known[params.conversationId] then
      client.request(
        "turn/attach",
        { conversationId = params.conversationId, fromSeq = params.fromSeq },
        function() end
      )
    end
  end)
  client.on_notification("$/disconnected", function()
    vim.notify("jp: disconnected from the daemon (its turns keep running)", vim.log.levels.WARN)
  end)
  client.on_request("inquiry/prompt", prompt.inquiry)
  client.on_request("tool/permission", prompt.permission)
end

local function with_connection(fn)
  register()
  local ok, err = pcall(client.connect)
  if not ok then
    notify_error(err)
    return
  end
  local ok2, err2 = pcall(fn)
  if not ok2 then
    notify_error(err2)
  end
end

-- The selected lines as context for the model: file name, line numbers, the text.
local function range_context(line1, line2)
  local buf = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(buf)
  name = name ~= "" and vim.fn.fnamemodify(name, ":.") or "[No Name]"
  local lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  local numbered = {}
  local width = #tostring(line2)
  for i, line in ipairs(lines) do
    table.insert(numbered, ("%" .. width .. "d  %s"):format(line1 + i - 1, line))
  end
  local ft = vim.bo[buf].filetype
  return ("\n\nFrom %s, lines %d-%d:\n```%s\n%s\n```"):format(
    name,
    line1,
    line2,
    ft,
    table.concat(numbered, "\n")
  )
end

-- Show `conversation_id`: its persisted events, then (if a turn runs) the replay and
-- the live events of that turn. Returns the view.
local function open_conversation(conversation_id)
  local v, created = view.get(conversation_id)
  known[conversation_id] = true
  v:show()
  if not created then
    return v
  end
  local running = {}
  local list = client.request_sync("turn/list", nil)
  for _, turn in ipairs(list.turns or {}) do
    if turn.conversationId == conversation_id and not turn.resumable then
      running[turn.turnId] = true
    end
  end
  local got = client.request_sync("conversation/get", { conversationId = conversation_id })
  v:history(got.events or {}, running)
  if next(running) ~= nil then
    -- Replay what the daemon still holds of the running turn, then follow it live.
    local replayed = {}
    early[conversation_id] = replayed
    local ok, err = pcall(client.request_sync, "turn/attach", { conversationId = conversation_id, fromSeq = 0 })
    early[conversation_id] = nil
    for _, params in ipairs(replayed) do
      if running[params.turnId] then
        v:turn_event(params)
      elseif params.seq and params.seq > v.last_seq then
        v.last_seq = params.seq
      end
    end
    if not ok then
      error(err, 0)
    end
  else
    client.request_sync("turn/attach", { conversationId = conversation_id })
  end
  return v
end

local function start_turn(message, conversation_id)
  local params = {
    message = message,
    conversationId = conversation_id,
    model = config.options.model,
    mode = config.options.mode,
  }
  local root = vim.fn.getcwd()
  local v = nil
  if conversation_id ~= nil then
    v = open_conversation(conversation_id)
    if v.turn_id ~= nil then
      error("jp: a turn is already running in this conversation (:JpCancel stops it)", 0)
    end
    v:user_message(message)
  end
  starting = starting + 1
  client.request("turn/start", params, function(err, result)
    starting = starting - 1
    if err ~= nil then
      if v ~= nil then
        v:note("error: " .. (err.message or "turn/start failed"))
      else
        notify_error("jp: " .. (err.message or "turn/start failed"))
      end
      return
    end
    local id = result.conversationId
    workspaces.set(root, id)
    if v == nil then
      v = view.get(id)
      known[id] = true
      v:show()
      v:user_message(message)
    end
    v.turn_id = v.turn_id or result.turnId
    local queued = early[id] or {}
    early[id] = nil
    if starting == 0 then
      -- Events of conversations nobody here shows, held while waiting: drop them.
      for other in pairs(early) do
        if not known[other] then
          early[other] = nil
        end
      end
    end
    for _, event in ipairs(queued) do
      v:turn_event(event)
    end
  end)
end

--- `:Jp {message}`: ask in this workspace's conversation (a new one if it has none).
--- `opts.new` starts a new conversation; `opts.line1`/`opts.line2` add those lines of
--- the current buffer as context.
function M.ask(message, opts)
  opts = opts or {}
  if message == nil or vim.trim(message) == "" then
    notify_error("jp: nothing to ask")
    return
  end
  if opts.line1 ~= nil then
    message = message .. range_context(opts.line1, opts.line2)
  end
  -- An untrusted workspace config is ignored by the daemon: offer to trust it first.
  require("jp.trust").offer(function()
    M.ask_trusted(message, opts)
  end)
end

function M.ask_trusted(message, opts)
  with_connection(function()
    local conversation_id = nil
    if not opts.new then
      conversation_id = workspaces.get(vim.fn.getcwd())
      if conversation_id ~= nil then
        local list = client.request_sync("conversation/list", nil)
        local exists = false
        for _, c in ipairs(list.conversations or {}) do
          exists = exists or c.conversationId == conversation_id
        end
        conversation_id = exists and conversation_id or nil
      end
    end
    start_turn(message, conversation_id)
  end)
end

local function current_conversation()
  local v = view.for_buffer(vim.api.nvim_get_current_buf())
  if v ~= nil then
    return v.id
  end
  return workspaces.get(vim.fn.getcwd())
end

--- `:JpAttach [id]`: show a conversation and follow its running turn (replay, then live).
function M.attach(conversation_id)
  with_connection(function()
    local id = conversation_id
    if id == nil or id == "" then
      id = current_conversation()
    end
    if id == nil then
      -- Nothing chosen: the most recent running turn, if any.
      local list = client.request_sync("turn/list", nil)
      local turns = vim.tbl_filter(function(t)
        return not t.resumable
      end, list.turns or {})
      id = turns[#turns] and turns[#turns].conversationId
    end
    if id == nil then
      error("jp: no conversation to attach to (:JpConversations lists them)", 0)
    end
    local v = open_conversation(id)
    if v.turn_id == nil then
      vim.notify("jp: no turn is running in " .. id, vim.log.levels.INFO)
    end
  end)
end

--- `:JpCancel`: cancel the running turn of this buffer's (or workspace's) conversation.
function M.cancel()
  with_connection(function()
    local id = current_conversation()
    local list = client.request_sync("turn/list", nil)
    for _, turn in ipairs(list.turns or {}) do
      if not turn.resumable and (id == nil or turn.conversationId == id) then
        client.request_sync("turn/cancel", { turnId = turn.turnId })
        return
      end
    end
    vim.notify("jp: no turn is running", vim.log.levels.INFO)
  end)
end

--- `:JpConversations`: pick a conversation with vim.ui.select and open its buffer.
function M.conversations()
  with_connection(function()
    local list = client.request_sync("conversation/list", nil)
    local items = list.conversations or {}
    if #items == 0 then
      vim.notify("jp: no conversations yet", vim.log.levels.INFO)
      return
    end
    vim.ui.select(items, {
      prompt = "jp conversations",
      kind = "jp",
      format_item = function(c)
        return ("%s  %s  (%s)"):format((c.updatedAt or ""):sub(1, 16), c.title or "", c.conversationId)
      end,
    }, function(choice)
      if choice ~= nil then
        with_connection(function()
          open_conversation(choice.conversationId)
          workspaces.set(vim.fn.getcwd(), choice.conversationId)
        end)
      end
    end)
  end)
end

local function before_lines(text)
  local lines = vim.split(text or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  return lines
end

--- `:JpDiff`: the last turn's changes of this buffer's (or workspace's) conversation,
--- one tab per changed file: the file as it is now beside its text before the turn,
--- in diff mode (`turn/changes`).
function M.diff()
  with_connection(function()
    local id = current_conversation()
    if id == nil then
      error("jp: no conversation here (:JpConversations lists them)", 0)
    end
    local got = client.request_sync("turn/changes", { conversationId = id })
    local files = got.files or {}
    if #files == 0 then
      vim.notify("jp: the last turn changed no files", vim.log.levels.INFO)
      return
    end
    for _, file in ipairs(files) do
      vim.cmd("tabnew " .. vim.fn.fnameescape(file.path))
      vim.cmd("diffthis")
      local filetype = vim.bo.filetype
      vim.cmd("leftabove vnew")
      local buf = vim.api.nvim_get_current_buf()
      vim.bo[buf].buftype = "nofile"
      vim.bo[buf].bufhidden = "wipe"
      vim.bo[buf].swapfile = false
      local before = type(file.before) == "string" and file.before or ""
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, before_lines(before))
      local label = file.created and "created by" or "before"
      pcall(vim.api.nvim_buf_set_name, buf, ("jpdiff://%s %s turn %s"):format(file.path, label, got.turnId))
      vim.bo[buf].modifiable = false
      vim.bo[buf].filetype = filetype
      vim.cmd("diffthis")
    end
    if got.undone then
      vim.notify("jp: these changes were undone already (:JpDiff shows them against the files now)")
    end
  end)
end

--- Conversation ids, for command completion.
function M.complete_conversations(prefix)
  local ok, list = pcall(client.request_sync, "conversation/list", nil, 2000)
  if not ok then
    return {}
  end
  local ids = {}
  for _, c in ipairs(list.conversations or {}) do
    if vim.startswith(c.conversationId, prefix or "") then
      table.insert(ids, c.conversationId)
    end
  end
  return ids
end

--- Configure the plugin (see `:help jp-setup`).
function M.setup(opts)
  config.setup(opts)
end

M.MODES = { "ask", "accept-edits", "auto", "read-only" }

--- `:JpMode [mode]`: the permission mode of the turns started from now on (picked with
--- `vim.ui.select` when not given).
function M.set_mode(mode)
  local function apply(choice)
    if choice == nil then
      return
    end
    if not vim.tbl_contains(M.MODES, choice) then
      notify_error(("jp: unknown mode %q (modes: %s)"):format(choice, table.concat(M.MODES, ", ")))
      return
    end
    config.options.mode = choice
    vim.notify("jp: mode " .. choice, vim.log.levels.INFO)
  end
  if mode ~= nil and mode ~= "" then
    return apply(mode)
  end
  vim.ui.select(M.MODES, { prompt = "jp permission mode" }, apply)
end

--- The models `model/list` offers: the default, then the aliases whose provider is usable.
local function usable_models(listed)
  local usable = {}
  for _, provider in ipairs(listed.providers or {}) do
    if provider.available then
      usable[provider.name] = true
    end
  end
  local function ok(model)
    return usable[vim.split(model, "/", { plain = true })[1]] == true
  end
  local models = {}
  if listed.defaultModel and ok(listed.defaultModel) then
    table.insert(models, listed.defaultModel)
  end
  local aliases = vim.tbl_keys(listed.aliases or {})
  table.sort(aliases)
  for _, alias in ipairs(aliases) do
    if ok(listed.aliases[alias]) then
      table.insert(models, alias)
    end
  end
  return models
end

--- `:JpModel [model]`: the model of the turns started from now on (`default`: the
--- configured one); without an argument, picked from the daemon's usable models.
function M.set_model(model)
  local function apply(choice)
    if choice == nil then
      return
    end
    config.options.model = choice ~= "default" and choice or nil
    vim.notify("jp: model " .. choice, vim.log.levels.INFO)
  end
  if model ~= nil and model ~= "" then
    return apply(model)
  end
  with_connection(function()
    local env = { cwd = vim.fn.getcwd(), env = vim.fn.environ() }
    local listed = client.request_sync("model/list", { environment = env })
    vim.ui.select(usable_models(listed), { prompt = "jp model" }, apply)
  end)
end

return M

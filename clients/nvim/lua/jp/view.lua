-- A conversation's buffer, `jp://<conversation id>` (filetype markdown): the user's
-- messages, the streamed answer, one line per tool call with its status, notes.
local config = require("jp.config")

local M = {}

local NS = vim.api.nvim_create_namespace("jp")
local views = {} -- conversation id -> view

local View = {}
View.__index = View

local function define_highlights()
  local links = {
    JpToolRunning = "DiagnosticWarn",
    JpToolDone = "DiagnosticOk",
    JpToolError = "DiagnosticError",
    JpNote = "Comment",
  }
  for group, target in pairs(links) do
    vim.api.nvim_set_hl(0, group, { link = target, default = true })
  end
end

local function one_line(text, limit)
  text = tostring(text or ""):gsub("%s+", " ")
  text = vim.trim(text)
  if #text > limit then
    text = text:sub(1, limit - 1) .. "…"
  end
  return text
end

local function new_buffer(conversation_id)
  local name = "jp://" .. conversation_id
  local existing = vim.fn.bufnr(name)
  if existing ~= -1 then
    return existing
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modifiable = false
  return buf
end

--- The view of `conversation_id`, created (with its buffer, not shown) if needed.
function M.get(conversation_id)
  local view = views[conversation_id]
  if view ~= nil and vim.api.nvim_buf_is_valid(view.buf) then
    return view, false
  end
  define_highlights()
  view = setmetatable({
    id = conversation_id,
    buf = new_buffer(conversation_id),
    mode = "empty", -- "empty" | "text" (appending to the answer) | "line"
    tools = {}, -- tool call id -> {mark, name, args}
    last_seq = 0,
    turn_id = nil, -- the running turn, when known
    answering = false, -- the "## Assistant" heading of the current turn is written
    usage = {}, -- token counts of the running turn, and its cost
  }, View)
  views[conversation_id] = view
  return view, true
end

--- The view whose buffer is `buf`, if any.
function M.for_buffer(buf)
  for _, view in pairs(views) do
    if view.buf == buf then
      return view
    end
  end
  return nil
end

--- Show the view's buffer in a window (a split, per the `split` option), reusing a
--- window that already shows it.
function View:show()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == self.buf then
      return win
    end
  end
  local split, size = config.options.split, config.options.split_size
  if split == "vertical" then
    vim.cmd((size and tostring(size) or "") .. "vsplit")
  elseif split == "horizontal" then
    vim.cmd((size and tostring(size) or "") .. "split")
  elseif split == "tab" then
    vim.cmd("tabnew")
  end
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, self.buf)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  return win
end

function View:edit(fn)
  vim.bo[self.buf].modifiable = true
  local ok, err = pcall(fn)
  vim.bo[self.buf].modifiable = false
  if not ok then
    error(err, 0)
  end
  -- Keep windows that show the end of the buffer following the stream.
  local last = vim.api.nvim_buf_line_count(self.buf)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == self.buf then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

function View:lines()
  return vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)
end

-- Append whole lines (with a blank line before a new block, except at the top).
function View:append_lines(lines, gap)
  self:edit(function()
    local count = vim.api.nvim_buf_line_count(self.buf)
    local empty = count == 1 and vim.api.nvim_buf_get_lines(self.buf, 0, 1, false)[1] == ""
    local block = {}
    if gap and not empty then
      table.insert(block, "")
    end
    vim.list_extend(block, lines)
    if empty then
      vim.api.nvim_buf_set_lines(self.buf, 0, 1, false, block)
    else
      vim.api.nvim_buf_set_lines(self.buf, count, count, false, block)
    end
  end)
end

--- A heading line such as "## You".
function View:heading(text)
  self:append_lines({ "## " .. text, "" }, true)
  self.mode = "line"
end

--- The user's message, under "## You".
function View:user_message(text)
  self:heading("You")
  self:append_lines(vim.split(text, "\n", { plain = true }), false)
  self.answering = false
end

--- Stream a piece of the answer: joined to the last line, newlines start new lines.
function View:text(piece)
  if piece == nil or piece == "" then
    return
  end
  if not self.answering then
    self:heading("Assistant")
    self.answering = true
  end
  local parts = vim.split(piece, "\n", { plain = true })
  self:edit(function()
    local count = vim.api.nvim_buf_line_count(self.buf)
    if self.mode ~= "text" then
      -- The answer starts a paragraph of its own, below a heading or a tool line.
      local last = vim.api.nvim_buf_get_lines(self.buf, count - 1, count, false)[1]
      local start = last == "" and { "" } or { "", "" }
      vim.api.nvim_buf_set_lines(self.buf, count, count, false, start)
      count = count + #start
      self.mode = "text"
    end
    local last = vim.api.nvim_buf_get_lines(self.buf, count - 1, count, false)[1]
    parts[1] = last .. parts[1]
    vim.api.nvim_buf_set_lines(self.buf, count - 1, count, false, parts)
  end)
end

local STATUS = {
  running = { "… running", "JpToolRunning" },
  done = { "✓ done", "JpToolDone" },
  error = { "✗ error", "JpToolError" },
  pending = { "… waiting", "JpToolRunning" },
}

local function tool_text(tool, status, detail)
  local label = STATUS[status]
  local text = ("- tool `%s` %s — %s"):format(tool.name, tool.args, label[1])
  if detail and detail ~= "" then
    text = text .. ": " .. detail
  end
  return text, label[2]
end

--- One line for a tool call, updated in place by `tool_status`.
function View:tool_call(id, name, arguments, diff)
  if not self.answering then
    self:heading("Assistant")
    self.answering = true
  end
  local args = one_line(vim.json.encode(arguments or vim.empty_dict()), 60)
  local tool = { name = name, args = args, diff = diff }
  local text, hl = tool_text(tool, "running")
  self:append_lines({ text }, self.mode == "text")
  local row = vim.api.nvim_buf_line_count(self.buf) - 1
  tool.mark = vim.api.nvim_buf_set_extmark(self.buf, NS, row, 0, { line_hl_group = hl })
  self.tools[id] = tool
  self.mode = "line"
end

--- Update a tool call's line: "done", or "error" with the first line of the message.
function View:tool_status(id, status, detail)
  local tool = self.tools[id]
  if tool == nil then
    return
  end
  local pos = vim.api.nvim_buf_get_extmark_by_id(self.buf, NS, tool.mark, {})
  if pos[1] == nil then
    return
  end
  local text, hl = tool_text(tool, status, detail and one_line(detail, 80) or nil)
  self:edit(function()
    vim.api.nvim_buf_set_lines(self.buf, pos[1], pos[1] + 1, false, { text })
    vim.api.nvim_buf_del_extmark(self.buf, NS, tool.mark)
    tool.mark = vim.api.nvim_buf_set_extmark(self.buf, NS, pos[1], 0, { line_hl_group = hl })
  end)
end

--- A file the turn changed, listed under its tool line (`:JpDiff` shows the changes).
function View:changed_file(path)
  local shown = vim.fn.fnamemodify(path, ":~:.")
  self:append_lines({ ("- changed `%s`"):format(shown) }, false)
  local row = vim.api.nvim_buf_line_count(self.buf) - 1
  vim.api.nvim_buf_set_extmark(self.buf, NS, row, 0, { line_hl_group = "JpToolDone" })
  self.mode = "line"
end

local PLAN_MARKS = { completed = "[x]", in_progress = "[-]", pending = "[ ]" }

--- The model's plan (`update_plan` arguments) as a markdown checklist under its call.
function View:plan(arguments)
  local plan = type(arguments) == "table" and arguments.plan or nil
  if type(plan) ~= "table" then
    return
  end
  local lines = { "", "**Plan**", "" }
  for _, item in ipairs(plan) do
    local mark = type(item) == "table" and PLAN_MARKS[item.status] or nil
    if mark == nil then
      return
    end
    table.insert(lines, ("- %s %s"):format(mark, one_line(tostring(item.step or ""), 200)))
  end
  table.insert(lines, "")
  self:append_lines(lines, true)
  self.mode = "line"
end

--- Add a `usage` event's counts to the running turn's.
function View:add_usage(event)
  for key, value in pairs(event.usage or {}) do
    if type(value) == "number" then
      self.usage[key] = (self.usage[key] or 0) + value
    end
  end
  if type(event.cost) == "number" then
    self.usage.cost = (self.usage.cost or 0) + event.cost
  end
end

--- The usage line at the end of a turn: tokens in and out (cache reads), and the cost.
function View:usage_line()
  local u = self.usage
  self.usage = {}
  if u.inputTokens == nil and u.outputTokens == nil then
    return
  end
  local text = ("usage: %d in, %d out"):format(u.inputTokens or 0, u.outputTokens or 0)
  if u.cacheReadTokens and u.cacheReadTokens > 0 then
    text = text .. (", %d cached"):format(u.cacheReadTokens)
  end
  if u.cost then
    text = text .. (", $%.4f"):format(u.cost)
  end
  self:note(text)
end

--- A note such as "[cancelled]", on its own line, highlighted as a comment.
function View:note(text)
  self:append_lines({ "*" .. text .. "*" }, true)
  local row = vim.api.nvim_buf_line_count(self.buf) - 1
  vim.api.nvim_buf_set_extmark(self.buf, NS, row, 0, { line_hl_group = "JpNote" })
  self.mode = "line"
end

local ENDINGS = {
  cancelled = "cancelled",
  max_tokens = "stopped: the answer hit the token limit",
  interrupted = "interrupted",
}

--- Render one live `turn/event` (params of the notification); events already seen
--- (by `seq`) are skipped, so a replay can overlap what is shown.
function View:turn_event(params)
  if params.seq ~= nil then
    if params.seq <= self.last_seq then
      return
    end
    self.last_seq = params.seq
  end
  local event = params.event or {}
  local kind = event.kind
  if kind == "turn_started" then
    self.turn_id = params.turnId
    self.answering = false
  elseif kind == "text_delta" then
    self:text(event.text)
  elseif kind == "tool_call" and not event.hidden then
    self:tool_call(event.id, event.name, event.arguments, event.diff)
    if event.name == "update_plan" then
      self:plan(event.arguments)
    end
  elseif kind == "usage" then
    self:add_usage(event)
  elseif kind == "tool_result" and not event.hidden then
    if event.isError then
      self:tool_status(event.id, "error", vim.split(event.content or "", "\n")[1])
    else
      self:tool_status(event.id, "done")
      local tool = self.tools[event.id]
      if tool ~= nil and type(tool.diff) == "table" and tool.diff.path then
        self:changed_file(tool.diff.path)
      end
    end
  elseif kind == "retry" then
    self:note(("retrying (%s)"):format(event.reason or "transient error"))
  elseif kind == "turn_completed" then
    self.turn_id = nil
    self:usage_line()
    local reason = event.stopReason
    if reason == "error" then
      self:note("error: " .. one_line(event.error or "the turn failed", 200))
    elseif ENDINGS[reason] then
      self:note(ENDINGS[reason])
    end
    self.mode = "line"
  end
end

--- Render persisted events (`conversation/get`), skipping the turns in `skip_turns`
--- after their user message (they are shown live instead).
function View:history(events, skip_turns)
  local skipping = false
  for _, event in ipairs(events) do
    local kind = event.type
    if kind == "turn_start" then
      skipping = skip_turns ~= nil and skip_turns[event.turn_id] == true
      self.answering = false
    elseif kind == "chat_request" then
      self:user_message(event.content or "")
    elseif skipping then -- luacheck: ignore 542
      -- shown by the live replay
    elseif kind == "chat_response" and event.message then
      self:text(event.message)
    elseif kind == "tool_call_request" then
      self:tool_call(event.id, event.name, event.arguments)
      self:tool_status(event.id, "pending")
      if event.name == "update_plan" then
        self:plan(event.arguments)
      end
    elseif kind == "tool_call_response" then
      if event.is_error then
        self:tool_status(event.id, "error", vim.split(event.content or "", "\n")[1])
      else
        self:tool_status(event.id, "done")
      end
    elseif kind == "file_changed" then
      self:changed_file(event.path)
    elseif kind == "turn_undo" then
      local count = #(event.restored or {}) + #(event.removed or {})
      self:note(("undone: %d file%s put back"):format(count, count == 1 and "" or "s"))
    elseif kind == "turn_end" and event.stop_reason ~= "end_turn" then
      local reason = event.stop_reason
      self:note(reason == "error" and ("error: " .. one_line(event.error or "", 200)) or (ENDINGS[reason] or reason))
    end
  end
end

return M

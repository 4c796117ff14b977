-- Questions and permission requests from the daemon, asked with vim.ui.select,
-- vim.ui.input and (for secrets) vim.fn.inputsecret. A prompt the user dismisses
-- answers -32800: the daemon records that the user cancelled. A question answered
-- elsewhere (another client, `jp inquiry answer`) ends the prompt here with a note.
local M = {}

local CANCELLED = -32800
local open = {} -- "<conversation id> <inquiry id>" -> {finish = fun(...)}

-- Inquiry ids repeat across conversations (`call_1.q.1`): the key has both.
local function key(params)
  return (params.conversationId or "") .. " " .. (params.inquiryId or "")
end

local function cancelled(message)
  return nil, { code = CANCELLED, message = message or "cancelled by the user" }
end

-- Run `start(finish)`, which opens an asynchronous prompt, and wait (yielding the
-- request's coroutine) until `finish(...)` is called by the prompt or by `resolve`.
local function await(id, start)
  local co = coroutine.running()
  local finished, values = false, nil
  local function finish(...)
    if finished then
      return
    end
    finished, values = true, { n = select("#", ...), ... }
    open[id] = nil
    if co and coroutine.status(co) == "suspended" then
      coroutine.resume(co)
    end
  end
  open[id] = { finish = finish }
  start(finish)
  if not finished then
    coroutine.yield()
  end
  return unpack(values, 1, values.n)
end

local function header(params)
  local who = params.promptLabel or params.toolName or "jp"
  local lines = {}
  local question = params.question or {}
  if question.context and question.context ~= "" then
    table.insert(lines, question.context)
  end
  if params.previousError then
    table.insert(lines, "(" .. params.previousError .. ")")
  end
  table.insert(lines, ("[%s] %s"):format(who, question.text or ""))
  return table.concat(lines, "\n")
end

local function choices_for(question)
  local answer_type = question.answerType or {}
  local remember = question.persistence == "turn"
  local items = {}
  local function add(label, answer, keep)
    table.insert(items, { label = label, answer = answer, remember = keep })
  end
  if answer_type.type == "boolean" then
    add("Yes", true, false)
    add("No", false, false)
    if remember then
      add("Yes, for the rest of this turn", true, true)
      add("No, for the rest of this turn", false, true)
    end
  else
    for _, option in ipairs(answer_type.options or {}) do
      add(option, option, false)
    end
  end
  for _, item in ipairs(items) do
    if question.default ~= nil and item.answer == question.default and not item.remember then
      item.label = item.label .. " (default)"
    end
  end
  return items
end

local function ask_choice(inquiry_id, prompt, items)
  return await(inquiry_id, function(finish)
    vim.ui.select(items, {
      prompt = prompt,
      kind = "jp",
      format_item = function(item)
        return item.label
      end,
    }, function(item)
      finish("answer", item)
    end)
  end)
end

--- `inquiry/prompt`: ask the question; returns `{answer, remember}` or a -32800 error.
function M.inquiry(params)
  local question = params.question or {}
  local kind = (question.answerType or {}).type
  local prompt = header(params)
  local id = key(params)
  if kind == "secret" then
    -- inputsecret never echoes and never enters the input history.
    local ok, value = pcall(vim.fn.inputsecret, prompt .. ": ")
    if not ok or value == nil or value == "" then
      return cancelled()
    end
    return { answer = value }
  end
  if kind == "boolean" or kind == "select" then
    local how, item = ask_choice(id, prompt, choices_for(question))
    if how == "resolved" then
      return cancelled("answered elsewhere")
    end
    if item == nil then
      return cancelled()
    end
    return { answer = item.answer, remember = item.remember }
  end
  if kind == "text" then
    local how, value = await(id, function(finish)
      vim.ui.input({ prompt = prompt .. ": ", default = question.default }, function(text)
        finish("answer", text)
      end)
    end)
    if how == "resolved" then
      return cancelled("answered elsewhere")
    end
    if value == nil then
      return cancelled()
    end
    return { answer = value }
  end
  return nil, { code = -32601, message = "jp.nvim cannot ask a " .. tostring(kind) .. " question" }
end

--- `tool/permission`: allow or deny a tool run (or its result reaching the model).
function M.permission(params)
  local what = params.kind == "deliver" and "send the result of" or "run"
  local args = vim.json.encode(params.arguments or vim.empty_dict())
  local prompt = ("[jp] Allow the model to %s `%s` %s?"):format(what, params.toolName, args)
  if params.kind == "deliver" and params.content then
    prompt = params.content:sub(1, 500) .. "\n" .. prompt
  end
  local items = {
    { label = "Allow", allow = true, remember = false },
    { label = "Allow for the rest of this turn", allow = true, remember = true },
    { label = "Deny", allow = false, remember = false },
    { label = "Deny for the rest of this turn", allow = false, remember = true },
  }
  local how, item = ask_choice(key(params), prompt, items)
  if how == "resolved" then
    return cancelled("answered elsewhere")
  end
  if item == nil then
    return cancelled()
  end
  return { allow = item.allow, remember = item.remember }
end

--- `inquiry/resolved`: a question settled anywhere; end our prompt for it, if open.
function M.resolved(params)
  local entry = open[key(params)]
  if type(entry) ~= "table" then
    return
  end
  local by = params.answeredBy and (" by " .. params.answeredBy) or ""
  vim.notify(("jp: question %s was %s elsewhere%s"):format(
    params.inquiryId,
    params.outcome == "answered" and "answered" or params.outcome,
    by
  ), vim.log.levels.INFO)
  entry.finish("resolved")
end

--- The prompts open in this Neovim ("<conversation id> <inquiry id>").
function M.open_ids()
  return vim.tbl_keys(open)
end

return M

-- Test harness for jp.nvim scenarios run by tests/e2e/test_nvim.py in a headless Neovim.
-- vim.ui.select, vim.ui.input and vim.fn.inputsecret are replaced by stubs that answer
-- from a script; everything observed is written as JSON to $JP_TEST_OUT.
local T = { asked = {}, notes = {}, answers = { select = {}, input = {}, secret = {} } }

vim.notify = function(message, level)
  table.insert(T.notes, tostring(message))
end

--- Options for require("jp").setup in tests: the daemon is `python -m jpd`.
function T.opts(extra)
  return vim.tbl_extend("force", {
    daemon_cmd = { os.getenv("JP_TEST_PYTHON"), "-m", "jpd" },
    split = "current",
    request_timeout = 30000,
    start_timeout = 30000,
  }, extra or {})
end

-- Touch `<out>.<name>` so the Python side can wait for a moment of the scenario.
function T.mark(name)
  local fd = assert(io.open(os.getenv("JP_TEST_OUT") .. "." .. name, "w"))
  fd:close()
end

local function pick(items, labels, answer)
  for i, label in ipairs(labels) do
    if label == answer or vim.startswith(label, answer) then
      return items[i]
    end
  end
  return nil
end

--- Answer prompts from `script`: {select = {...}, input = {...}, secret = {...}}. An
--- entry "dismiss" dismisses, "never" leaves the prompt open forever.
function T.stub_ui(script)
  T.answers = vim.tbl_extend("force", T.answers, script or {})
  vim.ui.select = function(items, opts, on_choice)
    local labels = {}
    for i, item in ipairs(items) do
      labels[i] = opts.format_item and opts.format_item(item) or tostring(item)
    end
    table.insert(T.asked, { kind = "select", prompt = opts.prompt, items = labels })
    T.mark("asked")
    local answer = table.remove(T.answers.select, 1)
    if answer == "never" then
      return
    end
    vim.schedule(function()
      on_choice(answer and answer ~= "dismiss" and pick(items, labels, answer) or nil)
    end)
  end
  vim.ui.input = function(opts, on_confirm)
    table.insert(T.asked, { kind = "input", prompt = opts.prompt, default = opts.default })
    T.mark("asked")
    local answer = table.remove(T.answers.input, 1)
    if answer == "never" then
      return
    end
    vim.schedule(function()
      on_confirm(answer ~= "dismiss" and answer or nil)
    end)
  end
  vim.fn.inputsecret = function(prompt)
    table.insert(T.asked, { kind = "secret", prompt = prompt })
    T.mark("asked")
    return table.remove(T.answers.secret, 1) or ""
  end
end

--- Wait until `predicate()` is true (the event loop runs meanwhile).
function T.wait(predicate, what, ms)
  if not vim.wait(ms or 30000, predicate, 10) then
    error("timed out waiting for " .. what, 0)
  end
end

--- The jp:// buffers: name -> lines.
function T.buffers()
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if vim.startswith(name, "jp://") then
      out[name] = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    end
  end
  return out
end

--- The lines of the only jp:// buffer (error if there is not exactly one).
function T.lines()
  local names = vim.tbl_keys(T.buffers())
  if #names ~= 1 then
    return {}
  end
  return T.buffers()[names[1]]
end

--- True when some line of the jp:// buffer contains `text`.
function T.has(text)
  for _, line in ipairs(T.lines()) do
    if line:find(text, 1, true) then
      return true
    end
  end
  return false
end

local function write(result)
  local fd = assert(io.open(os.getenv("JP_TEST_OUT"), "w"))
  fd:write(vim.json.encode(result))
  fd:close()
end

--- Run the scenario; write what was observed (and any error) and quit.
function T.run(fn)
  local ok, err = xpcall(fn, debug.traceback)
  local filetypes = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if vim.startswith(name, "jp://") then
      filetypes[name] = vim.bo[buf].filetype
    end
  end
  write({
    ok = ok,
    error = ok and vim.NIL or tostring(err),
    buffers = T.buffers(),
    filetypes = filetypes,
    asked = T.asked,
    notes = T.notes,
    extra = T.extra or vim.empty_dict(),
  })
  require("jp.client").disconnect()
  vim.cmd(ok and "qa!" or "cquit 1")
end

return T

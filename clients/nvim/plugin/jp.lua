-- Commands of jp.nvim (the Lua modules load on first use). See `:help jp`.
if vim.g.loaded_jp then
  return
end
vim.g.loaded_jp = true

local function ask(new)
  return function(opts)
    local range = opts.range > 0 and { line1 = opts.line1, line2 = opts.line2 } or {}
    range.new = new
    require("jp").ask(opts.args, range)
  end
end

vim.api.nvim_create_user_command("Jp", ask(false), {
  nargs = "+",
  range = true,
  desc = "Ask jp in this workspace's conversation",
})
vim.api.nvim_create_user_command("JpNew", ask(true), {
  nargs = "+",
  range = true,
  desc = "Ask jp in a new conversation",
})
vim.api.nvim_create_user_command("JpAttach", function(opts)
  require("jp").attach(opts.args)
end, {
  nargs = "?",
  complete = function(lead)
    return require("jp").complete_conversations(lead)
  end,
  desc = "Follow a conversation's running turn",
})
vim.api.nvim_create_user_command("JpCancel", function()
  require("jp").cancel()
end, { nargs = 0, desc = "Cancel the running jp turn" })
vim.api.nvim_create_user_command("JpConversations", function()
  require("jp").conversations()
end, { nargs = 0, desc = "Pick a jp conversation" })
vim.api.nvim_create_user_command("JpDiff", function()
  require("jp").diff()
end, { nargs = 0, desc = "Show the files the last jp turn changed, in diff splits" })
vim.api.nvim_create_user_command("JpMode", function(opts)
  require("jp").set_mode(opts.args)
end, {
  nargs = "?",
  complete = function()
    return { "ask", "accept-edits", "auto", "read-only" }
  end,
  desc = "Set the permission mode of jp turns",
})
vim.api.nvim_create_user_command("JpModel", function(opts)
  require("jp").set_model(opts.args)
end, { nargs = "?", desc = "Set the model of jp turns" })

-- SPDX-License-Identifier: MIT
-- generator/diag.lua: collected diagnostics in the form file:line: error: msg.
--
-- Every error is collected rather than raised, so one run reports all of
-- them; the generator writes nothing unless the list is empty.
local diag = {}
diag.__index = diag

function diag.new()
  return setmetatable({ list = {} }, diag)
end

local function source_line(file, line)
  local f = io.open(file, "r")
  if not f then return nil end
  local i = 0
  for text in f:lines() do
    i = i + 1
    if i == line then f:close(); return text end
  end
  f:close()
end

function diag:add(file, line, msg)
  self.list[#self.list + 1] = { file = file, line = line or 1, msg = msg }
end

-- Turn a Lua error (possibly with a traceback) into a diagnostic.  The
-- location is the first frame that names `file`; failing that, the one the
-- message itself starts with.
function diag:from_lua(err, file)
  err = tostring(err)
  local first = err:match("^[^\n]*")
  local esc = file:gsub("%p", "%%%0")
  local line = err:match(esc .. ":(%d+):")
  local msg = first:gsub("^[^:]+:%d+: ", "")
  if not line then
    -- Lua shortens long chunk names to "...tail": match the tail.
    local tail, l = first:match("^%.%.%.([^:]+):(%d+): ")
    if tail and file:sub(-#tail) == tail then line = l end
  end
  if not line then
    local f, l = first:match("^([^:]+):(%d+): ")
    if f then file, line = f, l end
  end
  self:add(file, tonumber(line) or 1, msg)
end

function diag:empty()
  return #self.list == 0
end

function diag:report(out)
  for _, e in ipairs(self.list) do
    out:write(("%s:%d: error: %s\n"):format(e.file, e.line, e.msg))
    local text = source_line(e.file, e.line)
    if text then out:write("    " .. text .. "\n") end
  end
end

return diag

-- SPDX-License-Identifier: MIT
-- generator/render.lua: expand a template with Penlight's pl.template.
--
-- Template syntax: a line whose first non-blank character is '@' is Lua; in
-- any other line $(expr) is replaced by the value of expr.  ('#' is C's, so
-- Penlight's default escape is moved to '@'.)
--
-- Two bits of bookkeeping ride along with every line, so that errors in Lua
-- and in nvcc both point into the template:
--   * each Lua line is prefixed with __at(N), and each text line with
--     $(__at(N)), N being its line in the template; __at records the line a
--     runtime error belongs to and returns an invisible marker;
--   * after rendering, the markers become `#line N "template"` directives,
--     emitted only where the output stops following the template line by line
--     (after a skipped branch, a loop, or a multi-line expansion).
local template = require("pl.template")

local render = {}

local MARK_OPEN, MARK_CLOSE = "\1", "\2"

local function annotate(src)
  local out, n = {}, 0
  for line in (src .. (src:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    n = n + 1
    local lua = line:match("^%s*@(.*)$")
    if lua then
      out[n] = ("@ __at(%d) %s"):format(n, lua)
    else
      out[n] = ("$(__at(%d))%s"):format(n, line)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Map a line of Penlight's generated Lua back to the template: the last
-- __at(N) at or before it.
local function template_line(code, code_line)
  local last, i = 1, 0
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    i = i + 1
    for n in line:gmatch("__at%((%d+)%)") do last = tonumber(n) end
    if i >= code_line then break end
  end
  return last
end

-- Compile a template file.  Returns a compiled object or nil after adding a
-- file:line diagnostic to errs.
function render.compile(path, errs)
  local f = io.open(path, "r")
  if not f then
    errs:add(path, 1, "cannot open template")
    return nil
  end
  local src = f:read("a")
  f:close()
  local ct, err, code = template.compile(annotate(src), {
    chunk_name = "=" .. path, escape = "@", inline_escape = "$",
    inline_brackets = "()", debug = true,
  })
  if not ct then
    local l = tostring(err):match(":(%d+):")
    local msg = tostring(err):gsub("^[^:]*:%d+: ", "")
    errs:add(path, l and template_line(code, tonumber(l)) or 1, msg)
    return nil
  end
  return { ct = ct, path = path }
end

-- Turn markers into #line directives (see the block comment at the top).
local function place_lines(text, path)
  local out, expect = {}, nil
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    local n, rest = line:match("^" .. MARK_OPEN .. "(%d+)" .. MARK_CLOSE .. "(.*)$")
    if n then
      n = tonumber(n)
      -- A marker can also land mid-line when an expansion spans lines.
      rest = rest:gsub(MARK_OPEN .. "%d+" .. MARK_CLOSE, "")
      if n ~= expect then out[#out + 1] = ('#line %d "%s"'):format(n, path) end
      out[#out + 1] = rest
      expect = n + 1
    else
      out[#out + 1] = (line:gsub(MARK_OPEN .. "%d+" .. MARK_CLOSE, ""))
      expect = nil
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Render the compiled template for one configuration.  env holds the
-- configuration's values; they are visible to the template as globals.
function render.expand(compiled, env, errs)
  local current = 1
  local scope = setmetatable({
    __at = function(n)
      current = n
      return MARK_OPEN .. n .. MARK_CLOSE
    end,
  }, { __index = function(_, k)
    local v = env[k]
    if v == nil then v = _G[k] end
    if v == nil then error(("'%s' is not defined for this template"):format(k), 2) end
    return v
  end })
  local out, err = compiled.ct:render(scope)
  if not out then
    local msg = tostring(err):match("^[^\n]*"):gsub("^[^:]*:%d+: ", "")
    errs:add(compiled.path, current, msg)
    return nil
  end
  return place_lines(out, compiled.path)
end

return render

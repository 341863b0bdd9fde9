-- SPDX-License-Identifier: MIT
-- generator/glob.lua: shell globs, read as fnmatch(3) reads them.
--
-- `make ONLY=...` (ktgen --only) and `ktune tune --variants` take the same
-- filter: comma-separated globs, each matching a whole variant name.  The
-- tuner matches with fnmatch(3) (flags 0); here each glob becomes a Lua
-- pattern with the same meaning:
--   *        any run of characters, also none
--   ?        any one character
--   [...]    one character of the set: ranges a-z, classes [:digit:],
--            negation [!...] or [^...]; a ] right after [ or [! is literal
--   \c       the character c itself
-- A [ without its ] is refused (fnmatch would read it as a plain [): a
-- filter that silently means something else is worse than an error.
local glob = {}

local CLASSES = {
  alnum = "%w", alpha = "%a", digit = "%d", lower = "%l", upper = "%u",
  space = "%s", punct = "%p", xdigit = "%x", cntrl = "%c",
}

-- A character as a Lua pattern item (in or out of a set).
local function literal(c)
  return c:match("%w") and c or "%" .. c
end

-- The Lua pattern of one glob's bracket expression, which starts at s[i]
-- ('['); returns it and the index after its ']', or nil and a message.
local function bracket(s, i)
  local j = i + 1
  local negate = s:sub(j, j) == "!" or s:sub(j, j) == "^"
  if negate then j = j + 1 end
  local items, first = {}, true
  while true do
    if j > #s then return nil, "unterminated [" end
    local c = s:sub(j, j)
    if c == "]" and not first then break end
    first = false
    if c == "[" and s:sub(j + 1, j + 1) == ":" then
      local name, e = s:match("^%[:(%a+):%]()", j)
      if not name then return nil, "unterminated [: in a set" end
      if not CLASSES[name] then return nil, "unknown class [:" .. name .. ":]" end
      items[#items + 1] = CLASSES[name]
      j = e
    else
      if c == "\\" then
        j = j + 1
        c = s:sub(j, j)
        if c == "" then return nil, "unterminated [" end
      end
      local hi = s:sub(j + 2, j + 2)
      if s:sub(j + 1, j + 1) == "-" and hi ~= "]" and hi ~= "" then
        if hi:byte() < c:byte() then return nil, ("range %s-%s is backwards"):format(c, hi) end
        for b = c:byte(), hi:byte() do items[#items + 1] = literal(string.char(b)) end
        j = j + 3
      else
        items[#items + 1] = literal(c)
        j = j + 1
      end
    end
  end
  return "[" .. (negate and "^" or "") .. table.concat(items) .. "]", j + 1
end

-- The anchored Lua pattern of one glob, or nil and a message.
function glob.pattern(s)
  local out, i = { "^" }, 1
  while i <= #s do
    local c = s:sub(i, i)
    if c == "*" then
      out[#out + 1] = ".*"
      i = i + 1
    elseif c == "?" then
      out[#out + 1] = "."
      i = i + 1
    elseif c == "[" then
      local set, after = bracket(s, i)
      if not set then return nil, after end
      out[#out + 1] = set
      i = after
    elseif c == "\\" then
      if i == #s then return nil, "\\ at the end" end
      out[#out + 1] = literal(s:sub(i + 1, i + 1))
      i = i + 2
    else
      out[#out + 1] = literal(c)
      i = i + 1
    end
  end
  out[#out + 1] = "$"
  return table.concat(out)
end

-- The globs of a comma-separated list (blanks around them ignored), each
-- as { glob = ..., pattern = ... }; or nil, the bad glob and why.
function glob.list(text)
  local out = {}
  for g in text:gmatch("[^,%s]+") do
    local pat, err = glob.pattern(g)
    if not pat then return nil, g, err end
    out[#out + 1] = { glob = g, pattern = pat }
  end
  return out
end

-- Whether name matches any glob of a list from glob.list; counts, in each
-- glob's `hits`, the names it matched.
function glob.any(list, name)
  local hit = false
  for _, g in ipairs(list) do
    if name:match(g.pattern) then
      g.hits = (g.hits or 0) + 1
      hit = true
    end
  end
  return hit
end

return glob

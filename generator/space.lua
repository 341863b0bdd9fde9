-- SPDX-License-Identifier: MIT
-- generator/space.lua: load a family's parameter space and enumerate it.
--
-- A space file (templates/<family>.space.lua) returns plain data: the family,
-- family-wide constraints, and one or more kernels (algorithms), each with
-- its template (one kernel per template), ordered parameter value lists
-- (each parameter with the tag that spells it in names: generator/tags.lua),
-- a derive function, its own constraints and its own prune list.  Each rule is
-- { "one-line reason", fn } where fn(v, target) returns true to keep v.
--
-- The two lists say different things.  `constraints` hold what can be built
-- on the target at all (hardware limits, what the kernel needs to be
-- correct); `prune` holds what measurements showed cannot win, each reason
-- citing the GPU and the measurement.  Pruning applies only to what the
-- constraints keep, and --no-prune skips it, so that a new GPU can tune the
-- whole feasible space.
local diag = require("generator.diag")
local tags = require("generator.tags")

local space = {}

-- Fields every kernel's derive() must set: the runtime checks them before it
-- chooses a variant (see runtime/kt_variant.h).  A space adds the fields of
-- its own family in `required`.
local REQUIRED = { "threads", "smem_static", "smem_dynamic", "cluster", "min_cc" }

local function where(fn, file)
  local info = fn and debug.getinfo(fn, "S")
  return info and info.linedefined or 1, file
end

-- The first line of the space file at or after line `from` that contains
-- `text` (plain), for a diagnostic about plain data; else `from`.
function space.locate(s, text, from)
  from = from or 1
  for i = from, #s.lines do
    if s.lines[i]:find(text, 1, true) then return i end
  end
  return from
end

-- Run fn under xpcall; turn a Lua error into a file:line diagnostic that
-- points into the space file rather than into the generator.
-- guarded's result: xpcall's, passed on without a table (it runs once a
-- configuration of the product).
local function guarded_result(errs, file, ok, ...)
  if ok then return ok, ... end
  errs:from_lua((...), file)
  return false
end

local function guarded(errs, file, fn, ...)
  return guarded_result(errs, file, xpcall(fn, debug.traceback, ...))
end

function space.load(path, errs)
  local chunk, err = loadfile(path, "t", setmetatable({}, { __index = _G }))
  if not chunk then
    errs:from_lua(err, path)
    return nil
  end
  local ok, s = guarded(errs, path, chunk)
  if not ok then return nil end
  if type(s) ~= "table" then
    errs:add(path, 1, "space file must return a table")
    return nil
  end
  s.file = path
  s.lines = {}
  for l in io.lines(path) do s.lines[#s.lines + 1] = l end
  for _, f in ipairs({ "family", "kernels" }) do
    if s[f] == nil then errs:add(path, 1, "space has no field '" .. f .. "'") end
  end
  if s.template ~= nil then
    errs:add(path, space.locate(s, "template"), "the family names no template: each kernel names its own")
  end
  if type(s.kernels) ~= "table" then return nil end
  s.constraints = s.constraints or {}
  for i, k in ipairs(s.kernels) do
    local line = where(k.derive, path)
    if type(k.algo) == "string" then
      k.line = space.locate(s, ('algo = "%s"'):format(k.algo))
    else
      errs:add(path, line, ("kernel %d has no 'algo' string"):format(i))
    end
    if type(k.template) ~= "string" then
      errs:add(path, line, ("kernel %s names no 'template' (one template per kernel)"):format(tostring(k.algo)))
    end
    if k.name ~= nil then
      errs:add(path, space.locate(s, "name =", k.line), ("kernel %s: names are built from the parameters' tags; " ..
        "remove name"):format(tostring(k.algo)))
    end
    if type(k.derive) ~= "function" then errs:add(path, line, ("kernel %s has no 'derive' function"):format(tostring(k.algo))) end
    if type(k.params) ~= "table" then errs:add(path, line, ("kernel %s has no 'params' list"):format(tostring(k.algo))) end
    for j, p in ipairs(k.params or {}) do
      if type(p[1]) ~= "string" or type(p[2]) ~= "table" or #p[2] == 0 or type(p[3]) ~= "string" then
        errs:add(path, line, ("kernel %s: each parameter is { name, {values...}, \"meaning\", tag = \"t\" }"):format(
          tostring(k.algo)))
      else
        local pline = space.locate(s, ('"%s"'):format(p[1]), k.line)
        local why = tags.check(p, k.params[j - 1])
        if why then errs:add(path, pline, ("kernel %s: %s"):format(k.algo, why)) end
        for _, value in ipairs(p[2]) do
          if not tostring(value):match("^%w+$") then
            errs:add(path, pline, ("kernel %s: parameter '%s': value '%s' cannot be part of a name " ..
              "(letters and digits only)"):format(k.algo, p[1], tostring(value)))
          end
        end
      end
    end
    for _, list in ipairs({ "constraints", "prune" }) do
      k[list] = k[list] or {}
      for _, c in ipairs(k[list]) do
        if type(c[1]) ~= "string" or type(c[2]) ~= "function" then
          errs:add(path, line, ("kernel %s: each %s rule is { \"reason\", function(v, target) }"):format(
            tostring(k.algo), list))
        end
      end
    end
    -- needs: the parameters a constraint's verdict follows from (through
    -- derive), so that a configuration that breaks it rules out all that
    -- share them (space.enumerate, lean).  k.skip_at[c]: the last of them
    -- in the product's order.
    k.skip_at = {}
    for _, c in ipairs(k.constraints) do
      if c.needs ~= nil then
        local bad = not (type(c.needs) == "table" and #c.needs > 0) and "needs"
        local last = 0
        for _, name in ipairs(bad and {} or c.needs) do
          local at
          for i, p in ipairs(k.params or {}) do
            if p[1] == name then at = i end
          end
          bad = bad or (not at and ('"%s"'):format(tostring(name)))
          last = math.max(last, at or 0)
        end
        if bad then
          errs:add(path, space.locate(s, bad, k.line or line), ("kernel %s: a constraint's needs lists parameters " ..
            "of the kernel, { \"name\", ... }: %s is not one"):format(tostring(k.algo), bad))
        else
          k.skip_at[c] = last
        end
      end
    end
  end
  for _, c in ipairs(s.constraints) do
    if type(c[1]) ~= "string" or type(c[2]) ~= "function" then
      errs:add(path, 1, "each constraint is { \"reason\", function(v, target) }")
    end
  end
  return s
end

-- Cartesian product of the kernel's parameter lists, first parameter
-- outermost, so the order (and so every output) is deterministic: an
-- iterator, each configuration a fresh table, and skip(p), which makes the
-- iterator's next configuration the first whose parameters 1..p differ
-- from the last one's (those past p all run out at once).
local function product(params, extra)
  local idx, n, done, started = {}, #params, false, false
  for i = 1, n do
    if #params[i][2] == 0 then done = true end
    idx[i] = 1
  end
  -- One table constructor with a field per parameter, so that each table
  -- is made at its size at once (filled one key at a time, it grew four
  -- times: a third of the time went there).
  local fields = {}
  for i = 1, n do fields[i] = ("[P[%d][1]] = P[%d][2][idx[%d]]"):format(i, i, i) end
  -- extra: fields every configuration carries, made with the rest.
  local keys = {}
  for key in pairs(extra or {}) do keys[#keys + 1] = key end
  table.sort(keys)
  for _, key in ipairs(keys) do fields[#fields + 1] = ("[%q] = E[%q]"):format(key, key) end
  local make = assert(load("local P, idx, E = ... return function() return { " .. table.concat(fields, ", ") ..
    " } end", "=product", "t"))(params, idx, extra)
  local function skip(p)
    for j = p + 1, n do idx[j] = #params[j][2] end
  end
  return function()
    if done then return nil end
    -- Advance the odometer past the last configuration, last parameter
    -- fastest.
    if started then
      local i = n
      while i >= 1 do
        idx[i] = idx[i] + 1
        if idx[i] <= #params[i][2] then break end
        idx[i] = 1
        i = i - 1
      end
      if i < 1 then
        done = true
        return nil
      end
    end
    started = true
    return make()
  end, skip
end

-- Enumerate every configuration of every kernel in the space for target t.
-- Returns kept and dropped lists.  A dropped entry carries its kind,
-- "constraint" (it cannot be built) or "prune" (it can, but cannot win),
-- and every reason of that kind it broke, in the order they are written;
-- prune rules are checked only for what the constraints keep.  With
-- opts.no_prune, what pruning would drop is kept, with those reasons in
-- v.pruned.  What the constraints drop is named only with opts.names (for
-- --explain): most of the product is, and naming it took a third of the
-- time.  With opts.lean (ktgen --quiet, which reports nothing) it is not
-- returned at all, and its constraints are checked only up to the first
-- it breaks: the dropped list then holds what pruning drops alone, and the
-- product's tables are garbage as soon as they are judged (held, the
-- collector kept walking them: half the time).  Lean, a broken constraint
-- that names what it `needs` also skips the rest of the product that
-- shares those parameters: none of it could be kept.
function space.enumerate(s, t, errs, opts)
  local no_prune = opts and opts.no_prune
  local names = opts and opts.names
  local lean = opts and opts.lean
  local kept, dropped, seen = {}, {}, {}
  for _, k in ipairs(s.kernels) do
    local param_names = {}
    for _, p in ipairs(k.params) do param_names[#param_names + 1] = p[1] end
    -- reasons, plus those of the rules in list that v breaks (the first
    -- alone if stop); nil while there are none (most of the product breaks
    -- a constraint, most of what is left no rule).
    local function broken(list, v, reasons, stop)
      for i = 1, #list do
        local c = list[i]
        if not c[2](v, t) then
          reasons = reasons or {}
          reasons[#reasons + 1] = c[1]
          if stop then return reasons, c end
        end
      end
      return reasons
    end
    -- derive, name, every constraint and then every prune rule of one
    -- configuration: the kind of drop and its reasons.  One protected call
    -- per configuration: a Lua error anywhere still becomes a file:line
    -- diagnostic for the space file.
    local function evaluate(v)
      k.derive(v, t)
      local reasons, rule = broken(k.constraints, v, nil, lean)
      if not (reasons and lean) then reasons = broken(s.constraints, v, reasons, lean) end
      if reasons then
        if names then v.name = tags.name(s.family, k, v) end
        return "constraint", reasons, rule
      end
      v.name = tags.name(s.family, k, v)
      reasons = broken(k.prune, v)
      if not reasons then return nil end
      if no_prune then
        v.pruned = reasons
        return nil
      end
      return "prune", reasons
    end
    local configurations, skip = product(k.params, { family = s.family, algo = k.algo, param_names = param_names })
    for v in configurations do
      local ok, kind, reasons, rule = guarded(errs, s.file, evaluate, v)
      if not ok then return nil end
      local name = v.name
      if kind then
        if not (lean and kind == "constraint") then
          dropped[#dropped + 1] = { v = v, kind = kind, reasons = reasons }
        elseif rule and k.skip_at[rule] then
          -- What breaks a rule that names what it needs breaks it for every
          -- configuration that shares those parameters (space.load).
          skip(k.skip_at[rule])
        end
      else
        local missing = {}
        for _, group in ipairs({ REQUIRED, s.required or {} }) do
          for _, f in ipairs(group) do
            if v[f] == nil then missing[#missing + 1] = f end
          end
        end
        if #missing > 0 then
          errs:add(s.file, where(k.derive, s.file), ("kernel %s: derive() must set %s"):format(k.algo, table.concat(missing, ", ")))
          return nil
        end
        if seen[name] then
          errs:add(s.file, k.line, ("two configurations are both named '%s'"):format(name))
          return nil
        end
        if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
          errs:add(s.file, k.line, ("'%s' is not a C identifier"):format(tostring(name)))
          return nil
        end
        seen[name] = true
        v.doc = k.doc
        kept[#kept + 1] = v
      end
    end
  end
  return kept, dropped
end

return space

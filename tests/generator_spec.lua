-- SPDX-License-Identifier: MIT
-- tests/generator_spec.lua: the generator (generator/*.lua) checked against
-- the spaces and templates it ships with (templates/*).
--
--   busted --lpath='./?.lua' --pattern=_spec tests/      (from the project root)
--
-- Every expectation is worked out here from the space files, the target table
-- or the generated text itself; no count is copied from a run.  Each tree is
-- generated into a fresh directory under /tmp that is removed afterwards:
-- generated/ and build/ are never touched.
local space = require("generator.space")
local diag = require("generator.diag")
local targets = require("generator.targets")
local registry = require("generator.registry")
local tags = require("generator.tags")
local glob = require("generator.glob")

local LUA = "lua5.4"

-- ---- helpers -----------------------------------------------------------

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function exists(path)
  return os.execute("test -e '" .. path .. "'") == true
end

local function lines_of(text)
  local out = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end

local function mkdtemp()
  local p = assert(io.popen("mktemp -d /tmp/ktgen_spec.XXXXXX"))
  local dir = p:read("l")
  p:close()
  assert(dir and dir:match("^/tmp/ktgen_spec%.[%w]+$"), "mktemp -d failed")
  return dir
end

local function rm_tree(dir)
  -- Only ever a directory that mkdtemp made.
  assert(dir:match("^/tmp/ktgen_spec%.[%w]+$"), "refusing to remove " .. dir)
  os.execute("rm -rf '" .. dir .. "'")
end

-- Run the generator from the project root: exit code, stdout, stderr.
local function ktgen(args)
  local errfile = os.tmpname()
  local p = assert(io.popen(LUA .. " generator/ktgen.lua " .. args .. " 2>" .. errfile))
  local out = p:read("a")
  local _, _, code = p:close()
  local err = read(errfile) or ""
  os.remove(errfile)
  return code, out, err
end

local function ktgen_ok(args)
  local code, out, err = ktgen(args)
  assert(code == 0, "ktgen " .. args .. " failed:\n" .. err)
  return out
end

-- Every file under dir, as { relative path = content }.
local function tree(dir)
  local files = {}
  local p = assert(io.popen("cd '" .. dir .. "' && find . -type f | LC_ALL=C sort"))
  for path in p:lines() do
    local rel = path:sub(3)
    files[rel] = read(dir .. "/" .. rel)
  end
  p:close()
  return files
end

-- What differs between two trees, one line per file; {} when identical.
local function tree_diff(a, b)
  local out = {}
  for path, text in pairs(a) do
    if b[path] == nil then out[#out + 1] = "only in the first: " .. path
    elseif b[path] ~= text then out[#out + 1] = "differs: " .. path end
  end
  for path in pairs(b) do
    if a[path] == nil then out[#out + 1] = "only in the second: " .. path end
  end
  table.sort(out)
  return out
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function count_kind(dropped, kind)
  local n = 0
  for _, d in ipairs(dropped) do
    if d.kind == kind then n = n + 1 end
  end
  return n
end

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- Replace the first occurrence of `from` in `s`, literally.
local function replace_plain(s, from, to)
  local a, b = s:find(from, 1, true)
  assert(a, "'" .. from .. "' not found in '" .. s .. "'")
  return s:sub(1, a - 1) .. to .. s:sub(b + 1)
end

local function escape_pattern(s)
  return (s:gsub("%p", "%%%0"))
end

-- 64-bit FNV-1a, written apart from the generator's: the state is two 32-bit
-- halves, and multiplying by the prime 1099511628211 = 2^40 + 0x1b3 is a
-- small product plus a shift (x << 40 only moves lo's low 24 bits into hi).
local FNV_PRIME_LOW = 1099511628211 - (1 << 40)
local function fnv1a64(s)
  local hi, lo = 0xcbf29ce4, 0x84222325 -- offset basis 0xcbf29ce484222325
  for i = 1, #s do
    lo = lo ~ s:byte(i)
    local lo_p = lo * FNV_PRIME_LOW
    hi = (hi * FNV_PRIME_LOW + (lo_p >> 32) + (lo << 8)) & 0xffffffff
    lo = lo_p & 0xffffffff
  end
  return ("%08x%08x"):format(hi, lo)
end

-- ---- the spaces, read the way the generator reads them ---------------

-- Every family that has a space file, by name.
local FAMILIES = {}
do
  local p = assert(io.popen("ls templates/*.space.lua"))
  for path in p:lines() do FAMILIES[#FAMILIES + 1] = path:match("([^/]+)%.space%.lua$") end
  p:close()
  table.sort(FAMILIES)
end

local function load_space_fresh(family)
  local errs = diag.new()
  local s = space.load("templates/" .. family .. ".space.lua", errs)
  assert(s and errs:empty(), "cannot load the " .. family .. " space")
  return s
end

-- The tests only read the spaces and what enumerate returns, so both are
-- worked out once per family (and target and option) and shared.
local SPACES, ENUMERATED = {}, setmetatable({}, { __mode = "k" })

local function load_space(family)
  SPACES[family] = SPACES[family] or load_space_fresh(family)
  return SPACES[family]
end

local function enumerate(s, t, opts)
  local key = t.arch .. (opts and opts.no_prune and " --no-prune" or "")
  ENUMERATED[s] = ENUMERATED[s] or {}
  local memo = ENUMERATED[s][key]
  if memo then return memo[1], memo[2] end
  local errs = diag.new()
  local kept, dropped = space.enumerate(s, t, errs, { no_prune = opts and opts.no_prune, names = true })
  if not kept then
    local e = errs.list[1]
    error(("enumerate failed: %s:%d: %s"):format(e.file, e.line, e.msg))
  end
  ENUMERATED[s][key] = { kept, dropped }
  return kept, dropped
end

-- Every target the generator knows.
local TARGETS = targets.names()

-- Call fn(family, space, arch) for every family and every target.
local function each_space_and_target(fn)
  for _, family in ipairs(FAMILIES) do
    local s = load_space(family)
    for _, arch in ipairs(TARGETS) do fn(family, s, arch) end
  end
end

local function kernel_of(s, algo)
  for _, k in ipairs(s.kernels) do
    if k.algo == algo then return k end
  end
end

-- The constraints that apply to one kernel, in the order the generator
-- checks them: the kernel's own, then the family's.
local function constraints_of(s, k)
  local list = {}
  for _, c in ipairs(k.constraints or {}) do list[#list + 1] = c end
  for _, c in ipairs(s.constraints or {}) do list[#list + 1] = c end
  return list
end

-- The rules of one kind ("constraint" or "prune") that v breaks, in order.
local function broken_rules(s, v, t, kind)
  local k = kernel_of(s, v.algo)
  local out = {}
  for _, c in ipairs(kind == "prune" and (k.prune or {}) or constraints_of(s, k)) do
    if not c[2](v, t) then out[#out + 1] = c[1] end
  end
  return out
end

-- One configuration's parameter values, as a string that identifies it.
local function key_of(k, v)
  local parts = {}
  for _, p in ipairs(k.params) do parts[#parts + 1] = p[1] .. "=" .. tostring(v[p[1]]) end
  return table.concat(parts, ",")
end

-- Every combination of a kernel's parameter values, computed here rather
-- than by the generator.
local function all_keys(k)
  local keys = { "" }
  for i, p in ipairs(k.params) do
    local next_keys = {}
    for _, partial in ipairs(keys) do
      for _, value in ipairs(p[2]) do
        next_keys[#next_keys + 1] = partial .. (i > 1 and "," or "") .. p[1] .. "=" .. tostring(value)
      end
    end
    keys = next_keys
  end
  return keys
end

-- Values just outside a parameter's shipped range: the powers of two from 1
-- to 8x the largest value, and the largest + 1 (not a power of two).  Only
-- integer parameters are pushed; the rest stay as shipped.
local function probe_values(values)
  local hi, shipped = nil, {}
  for _, x in ipairs(values) do
    if math.type(x) ~= "integer" then return {} end
    shipped[x] = true
    hi = math.max(hi or x, x)
  end
  local out, x = {}, 1
  while x <= 8 * hi do
    if not shipped[x] then out[#out + 1] = x end
    x = x * 2
  end
  if not shipped[hi + 1] then out[#out + 1] = hi + 1 end
  return out
end

-- The space s reduced to kernel k, with parameter i fixed at `value`.
local function probe_space(s, k, i, value)
  local params = {}
  for j, p in ipairs(k.params) do
    if j == i then
      local probe = {}
      for key, x in pairs(p) do probe[key] = x end -- the tag and join too
      probe[2] = { value }
      params[j] = probe
    else
      params[j] = p
    end
  end
  local probe_kernel = setmetatable({ params = params }, { __index = k })
  return setmetatable({ kernels = { probe_kernel } }, { __index = s })
end

-- ---- the generated text ----------------------------------------------

-- The DO-NOT-EDIT block at the top of a generated .cu; then the prologue
-- that the generator writes (the ABI guard), up to the first #line; then the
-- body, the expanded template.
local SPDX = "/* SPDX-License-Identifier: MIT */\n"
local function without_spdx(text)
  return text:sub(1, #SPDX) == SPDX and text:sub(#SPDX + 1) or text
end
local function parse_header(text)
  if text:sub(1, #SPDX) ~= SPDX then return nil end -- the licence line comes first
  text = text:sub(#SPDX + 1)
  local block = text:match("^(/%*.-%*/)\n")
  if not block then return nil end
  local h = { params = {} }
  h.version, h.template = block:match("^/%* DO NOT EDIT: generated by ktgen (%S+) from (%S+)%.\n")
  h.command = block:match("\n %* Regenerate from the project root with:\n %*     ([^\n]+)\n")
  h.variant = block:match("\n %* variant: ([^\n]*)\n")
  h.family, h.algo = block:match("\n %* family:  (%S+) %(([^)]*)%)\n")
  h.target = block:match("\n %* target:  ([^\n]*)\n")
  h.includes = {}
  for path, hash in block:gmatch("\n %* includes: (%S+) %(FNV%-1a 64 (%x+)%)") do h.includes[path] = hash end
  local params = block:match("\n %* parameters:\n(.-)\n %* launch needs:")
  for line in ((params or "") .. "\n"):gmatch("([^\n]*)\n") do
    local name, value, meaning = line:match("^ %*   ([%a_][%w_]*) *= (%S+) +(.*)$")
    h.params[#h.params + 1] = name and { name, value, meaning } or { "unparsed line", line }
  end
  h.threads, h.smem_static, h.smem_dynamic, h.cluster = block:match(
    "\n %* launch needs: (%d+) threads, (%d+) B static %+ (%d+) B dynamic shared memory, cluster (%d+),")
  h.prologue, h.body = text:sub(#block + 2):match("^(.-)(#line .*)$")
  return h
end

-- registry.c: one table per entry, by name (a name seen twice is counted).
local function parse_registry(text)
  local entries, seen = {}, {}
  for name in text:gmatch('%.name = "([^"]*)", %.family') do seen[name] = (seen[name] or 0) + 1 end
  for name, fields in text:gmatch('%{ %.name = "([^"]*)",(.-) %},\n') do
    local e = { name = name }
    for field, value in fields:gmatch("%.([%w_]+) = ([^,]+)") do e[field] = value:gsub('^"(.*)"$', "%1") end
    e.params = {}
    local list = text:match("static const kt_param params_" .. name .. "%[%] = %{ (.-) %};\n")
    for p, v in (list or ""):gmatch('%{ "([^"]*)", "([^"]*)" %}') do e.params[#e.params + 1] = { p, v } end
    if e.family then entries[name] = e end -- not a row of kt_registry_targets
  end
  return entries, seen
end

-- variants.mk: { ["family/name"] = true } and the architecture it names.
local function parse_variants_mk(text)
  local set = {}
  local joined = text:gsub("\\\n", " ")
  for _, list in joined:gmatch("KT_VARIANTS_([%w_]+) := ([^\n]*)") do
    for item in list:gmatch("%S+") do set[item] = true end
  end
  return set, joined:match("KT_GENERATED_ARCH := (%S+)")
end

-- A pattern that matches a template line after its $(...) are expanded.
local function expansion_pattern(tpl_line)
  local parts, pos = {}, 1
  while true do
    local a, b = tpl_line:find("%$%b()", pos)
    if not a then break end
    parts[#parts + 1] = escape_pattern(tpl_line:sub(pos, a - 1))
    parts[#parts + 1] = ".-"
    pos = b + 1
  end
  parts[#parts + 1] = escape_pattern(tpl_line:sub(pos))
  return "^" .. table.concat(parts) .. "$"
end

-- ---- the tests -----------------------------------------------------------

assert(read("generator/ktgen.lua"), "run busted from the project root")

describe("ktgen", function()
  -- One generated tree per target, shared by the tests that only read it.
  local ROOT
  local TREE = {} -- arch -> { dir = ..., files = tree(dir), stdout = ... }

  setup(function()
    ROOT = mkdtemp()
    for _, arch in ipairs(TARGETS) do
      local dir = ROOT .. "/" .. arch
      local out = ktgen_ok("--arch " .. arch .. " --out " .. dir)
      TREE[arch] = { dir = dir, files = tree(dir), stdout = out }
    end
  end)

  teardown(function()
    if ROOT then rm_tree(ROOT) end
  end)

  -- The .cu files of one tree: { name = { family =, path =, text = } }.
  local function variants(arch)
    local out = {}
    for path, text in pairs(TREE[arch].files) do
      local family, name = path:match("^([%w_]+)/([%w_]+)%.cu$")
      if family then out[name] = { family = family, path = path, text = text } end
    end
    return out
  end

  describe("constraints", function()
    it("each family and kernel has constraints and prune rules with distinct, non-empty reasons", function()
      local problems = {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        for _, k in ipairs(s.kernels) do
          local seen = {}
          local rules = constraints_of(s, k)
          for _, c in ipairs(k.prune or {}) do rules[#rules + 1] = c end
          for _, c in ipairs(rules) do
            if c[1] == "" then problems[#problems + 1] = family .. "/" .. k.algo .. ": empty reason" end
            if seen[c[1]] then problems[#problems + 1] = family .. "/" .. k.algo .. ": reason twice: " .. c[1] end
            seen[c[1]] = true
          end
        end
      end
      assert.are.same({}, problems)
    end)

    it("enumerate meets every combination of parameter values exactly once, kept or dropped", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      local kept, dropped = enumerate(s, targets.get(arch))
      local met = {}
      local function meet(v)
        local k = kernel_of(s, v.algo)
        local key = v.algo .. ":" .. key_of(k, v)
        met[key] = (met[key] or 0) + 1
      end
      for _, v in ipairs(kept) do meet(v) end
      for _, d in ipairs(dropped) do meet(d.v) end
      local expected = 0
      for _, k in ipairs(s.kernels) do
        for _, key in ipairs(all_keys(k)) do
          expected = expected + 1
          if met[k.algo .. ":" .. key] ~= 1 then
            problems[#problems + 1] = ("%s %s: %s:%s met %d times"):format(family, arch, k.algo, key,
              met[k.algo .. ":" .. key] or 0)
          end
        end
      end
      if #kept + #dropped ~= expected then
        problems[#problems + 1] = ("%s %s: %d kept + %d dropped, but the space has %d combinations"):format(
          family, arch, #kept, #dropped, expected)
      end
      end)
      assert.are.same({}, problems)
    end)

    -- A constraint's needs lets the lean enumeration (ktgen --quiet) skip
    -- every configuration that shares those parameters with one that
    -- broke it, so the verdict must follow from them alone.
    it("a constraint's verdict is the same wherever the parameters it needs are", function()
      local problems, checked = {}, 0
      each_space_and_target(function(family, s, arch)
        local t = targets.get(arch)
        local kept, dropped = enumerate(s, t)
        for _, k in ipairs(s.kernels) do
          for _, c in ipairs(k.constraints or {}) do
            if c.needs then
              -- Each configuration's needed values as one number (their
              -- places in the value lists, mixed radix): no string per
              -- configuration, of which there are millions here.
              local place, radix = {}, {}
              for i, name in ipairs(c.needs) do
                local values
                for _, p in ipairs(k.params) do
                  if p[1] == name then values = p[2] end
                end
                place[i] = {}
                for j, x in ipairs(values) do place[i][x] = j - 1 end
                radix[i] = #values
              end
              local verdicts = {}
              local function check(v)
                if v.algo ~= k.algo then return end
                local key = 0
                for i, name in ipairs(c.needs) do key = key * radix[i] + place[i][v[name]] end
                local verdict = c[2](v, t) and true or false
                checked = checked + 1
                if verdicts[key] == nil then
                  verdicts[key] = verdict
                elseif verdicts[key] ~= verdict then
                  local at = {}
                  for _, name in ipairs(c.needs) do at[#at + 1] = name .. "=" .. tostring(v[name]) end
                  problems[#problems + 1] = ("%s %s %s: '%s' differs at %s"):format(family, arch, k.algo, c[1],
                    table.concat(at, ","))
                  verdicts[key] = verdict
                end
              end
              for _, v in ipairs(kept) do check(v) end
              for _, d in ipairs(dropped) do check(d.v) end
            end
          end
        end
      end)
      assert.is_true(checked > 0, "no constraint names what it needs")
      assert.are.same({}, problems)
    end)

    it("the lean enumeration keeps, prunes and names what the full one does", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
        local t = targets.get(arch)
        for _, no_prune in ipairs({ false, true }) do
          local kept, dropped = enumerate(s, t, { no_prune = no_prune })
          local errs = diag.new()
          local lkept, ldropped = space.enumerate(s, t, errs, { no_prune = no_prune, lean = true })
          assert(lkept, family .. " " .. arch .. ": lean enumerate failed")
          local function names(list, field)
            local out = {}
            for _, x in ipairs(list) do
              local v = field and x[field] or x
              if not field or x.kind == "prune" then
                out[#out + 1] = v.name .. (x.reasons and (": " .. table.concat(x.reasons, "; ")) or "") ..
                  (v.pruned and (" pruned " .. table.concat(v.pruned, "; ")) or "")
              end
            end
            return out
          end
          local what = ("%s %s%s: "):format(family, arch, no_prune and " --no-prune" or "")
          local a, b = names(kept), names(lkept)
          if table.concat(a, "\n") ~= table.concat(b, "\n") then problems[#problems + 1] = what .. "kept differs" end
          a, b = names(dropped, "v"), names(ldropped, "v")
          if table.concat(a, "\n") ~= table.concat(b, "\n") then problems[#problems + 1] = what .. "pruned differs" end
        end
      end)
      assert.are.same({}, problems)
    end)

    it("every kept configuration passes every constraint and every prune rule, on every target", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      local t = targets.get(arch)
      local kept = enumerate(s, t)
      for _, v in ipairs(kept) do
        for _, kind in ipairs({ "constraint", "prune" }) do
          for _, r in ipairs(broken_rules(s, v, t, kind)) do
            problems[#problems + 1] = ("%s kept %s, which breaks: %s"):format(arch, v.name, r)
          end
        end
      end
      end)
      assert.are.same({}, problems)
    end)

    -- A configuration is dropped by the constraints (it cannot be built),
    -- or else by pruning (it cannot win): never both, and pruning lists only
    -- the prune rules it breaks.
    it("every dropped configuration lists exactly the constraints, or else the prune rules, it breaks", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      local t = targets.get(arch)
      local _, dropped = enumerate(s, t)
      for _, d in ipairs(dropped) do
        local constraints = broken_rules(s, d.v, t, "constraint")
        local expected = constraints
        if d.kind == "prune" then
          expected = broken_rules(s, d.v, t, "prune")
          if #constraints > 0 then
            problems[#problems + 1] = ("%s pruned %s, which cannot be built: %s"):format(
              arch, d.v.name, table.concat(constraints, "; "))
          end
        elseif d.kind ~= "constraint" then
          problems[#problems + 1] = ("%s dropped %s as %s"):format(arch, d.v.name, tostring(d.kind))
        end
        if #expected == 0 or table.concat(expected, "\n") ~= table.concat(d.reasons, "\n") then
          problems[#problems + 1] = ("%s dropped %s (%s) for {%s} but it breaks {%s}"):format(
            arch, d.v.name, tostring(d.kind), table.concat(d.reasons, "; "), table.concat(expected, "; "))
        end
      end
      end)
      assert.are.same({}, problems)
    end)

    it("every prune rule drops a configuration that the constraints keep, with its reason (on some target)",
      function()
      local problems = {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        local shown = {}
        for _, arch in ipairs(TARGETS) do
          local _, dropped = enumerate(s, targets.get(arch))
          for _, d in ipairs(dropped) do
            if d.kind == "prune" then
              for _, r in ipairs(d.reasons) do shown[d.v.algo .. "\0" .. r] = true end
            end
          end
        end
        for _, k in ipairs(s.kernels) do
          for _, c in ipairs(k.prune or {}) do
            if not shown[k.algo .. "\0" .. c[1]] then
              problems[#problems + 1] = family .. "/" .. k.algo .. " never prunes for: " .. c[1]
            end
          end
        end
      end
      assert.are.same({}, problems)
    end)

    -- What pruning drops must be a measured loss: each reason starts with
    -- the GPU it was measured on and, in parentheses, the file that records
    -- the measurement, e.g. "H100 (bench/reference/README.md): ...".
    it("every prune reason names the GPU and the file with the measurement", function()
      local problems = {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        for _, k in ipairs(s.kernels) do
          for _, c in ipairs(k.prune or {}) do
            local gpu, source = c[1]:match("^(%u[%w%-]*%d[%w%-]*) %(([^),]+)[^)]*%): %S")
            if not gpu then
              problems[#problems + 1] = family .. "/" .. k.algo .. ": names no GPU and source: " .. c[1]
            elseif not exists(source) then
              problems[#problems + 1] = family .. "/" .. k.algo .. ": cites a missing file " .. source
            end
          end
        end
      end
      assert.are.same({}, problems)
    end)

    it("--no-prune keeps a superset: what pruning drops, each configuration passing every constraint", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      local t = targets.get(arch)
      local kept, dropped = enumerate(s, t)
      local all, all_dropped = enumerate(s, t, { no_prune = true })
      local expected = {}
      for _, v in ipairs(kept) do expected[v.name] = "kept" end
      for _, d in ipairs(dropped) do
        if d.kind == "prune" then expected[d.v.name] = "pruned" end
        if d.kind == "constraint" then expected[d.v.name] = "infeasible" end
      end
      for _, d in ipairs(all_dropped) do
        if d.kind ~= "constraint" or expected[d.v.name] ~= "infeasible" then
          problems[#problems + 1] = ("%s --no-prune dropped %s (%s), which was %s"):format(
            arch, d.v.name, tostring(d.kind), tostring(expected[d.v.name]))
        end
      end
      for _, v in ipairs(all) do
        local was = expected[v.name]
        if was ~= "kept" and was ~= "pruned" then
          problems[#problems + 1] = ("%s --no-prune kept %s, which was %s"):format(arch, v.name, tostring(was))
        end
        if (was == "pruned") ~= (v.pruned ~= nil) then
          problems[#problems + 1] = arch .. " " .. v.name .. ": pruned is not marked as such"
        end
        local bad = broken_rules(s, v, t, "constraint")
        if #bad > 0 then problems[#problems + 1] = arch .. " --no-prune kept " .. v.name .. ": " .. bad[1] end
      end
      if #all ~= #kept + count_kind(dropped, "prune") then
        problems[#problems + 1] = ("%s %s: --no-prune keeps %d, not %d kept + %d pruned"):format(
          family, arch, #all, #kept, count_kind(dropped, "prune"))
      end
      end)
      assert.are.same({}, problems)
    end)

    it("never prunes a default: on every target each default is kept or cannot be built", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      local is_default = {}
      for _, name in ipairs(s.defaults or {}) do is_default[name] = true end
      local _, dropped = enumerate(s, targets.get(arch))
      for _, d in ipairs(dropped) do
        if is_default[d.v.name] and d.kind ~= "constraint" then
          problems[#problems + 1] = arch .. ": default " .. d.v.name .. " is dropped by " .. d.kind
        end
      end
      end)
      assert.are.same({}, problems)
    end)

    -- A constraint that nothing in the shipped value lists breaks (a guard
    -- for values someone may add later) is still checked: one parameter at
    -- a time is pushed outside its shipped range (probe_values), and the
    -- generator's own enumerate must drop the result for that reason.
    -- Probes that make derive() itself fail (a division by zero) are skipped.
    it("every constraint drops a configuration that breaks it, with its reason (on some target)", function()
      local problems = {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        local shown = {} -- algo .. reason -> true once a breaker was dropped for it
        local function collect(dropped, t)
          for _, d in ipairs(dropped) do
            local k = kernel_of(s, d.v.algo)
            for _, c in ipairs(constraints_of(s, k)) do
              local listed = false
              for _, r in ipairs(d.reasons) do listed = listed or r == c[1] end
              if listed and not c[2](d.v, t) then shown[k.algo .. "\0" .. c[1]] = true end
            end
          end
        end
        -- Kernel k needs no more probes once its own constraints and the
        -- family-wide ones have each been shown (by any kernel, for those).
        local function all_shown(k)
          for _, c in ipairs(k.constraints or {}) do
            if not shown[k.algo .. "\0" .. c[1]] then return false end
          end
          for _, c in ipairs(s.constraints or {}) do
            local any = false
            for _, other in ipairs(s.kernels) do any = any or shown[other.algo .. "\0" .. c[1]] end
            if not any then return false end
          end
          return true
        end
        for _, arch in ipairs(TARGETS) do
          local t = targets.get(arch)
          local _, dropped = enumerate(s, t)
          collect(dropped, t)
        end
        for _, arch in ipairs(TARGETS) do
          local t = targets.get(arch)
          for _, k in ipairs(s.kernels) do
            for i, p in ipairs(k.params) do
              for _, value in ipairs(probe_values(p[2])) do
                if not all_shown(k) then
                  local _, probe_dropped = space.enumerate(probe_space(s, k, i, value), t, diag.new())
                  if probe_dropped then collect(probe_dropped, t) end
                end
              end
            end
          end
        end
        -- A kernel's constraint must bite on that kernel; a family-wide one
        -- on at least one kernel.
        for _, k in ipairs(s.kernels) do
          for _, c in ipairs(k.constraints or {}) do
            if not shown[k.algo .. "\0" .. c[1]] then
              problems[#problems + 1] = family .. "/" .. k.algo .. " never drops for: " .. c[1]
            end
          end
        end
        for _, c in ipairs(s.constraints or {}) do
          local any = false
          for _, k in ipairs(s.kernels) do any = any or shown[k.algo .. "\0" .. c[1]] end
          if not any then problems[#problems + 1] = family .. " (family-wide) never drops for: " .. c[1] end
        end
      end
      assert.are.same({}, problems)
    end)

    it("a target-dependent constraint bites on one target and not on another", function()
      -- "cluster launch ... need sm_90" is the example: it must drop
      -- something on a target without clusters and nothing on one with them.
      local s = load_space("hist")
      local reason
      for _, k in ipairs(s.kernels) do
        for _, c in ipairs(k.constraints or {}) do
          if c[1]:find("need sm_90", 1, true) then reason = c[1] end
        end
      end
      assert.is_not_nil(reason, "hist has a constraint whose reason says 'need sm_90'")
      local function drops(arch)
        local n = 0
        local _, dropped = enumerate(s, targets.get(arch))
        for _, d in ipairs(dropped) do
          for _, r in ipairs(d.reasons) do if r == reason then n = n + 1 end end
        end
        return n
      end
      assert.is_true(drops("sm_80") > 0, "drops on sm_80")
      assert.are.equal(0, drops("sm_90"))
    end)

    -- setmaxnreg moves registers only within what the block was launched
    -- with: a consumer warpgroup that asks for more than the producer gave
    -- up waits in setmaxnreg.inc forever.  (A 64-register producer once got
    -- 224-register consumers from a split counted from the SM's 65536.)
    it("the Hopper gemm kernel's register split fits the registers its block is launched with", function()
      local s = load_space("gemm")
      local problems, checked = {}, 0
      for _, arch in ipairs(TARGETS) do
        for _, v in ipairs((enumerate(s, targets.get(arch)))) do
          if v.algo == "wgmma" and v.setmaxnreg then
            checked = checked + 1
            local asked, launched = 128 * (v.regs_producer + v.wg * v.regs_consumer), v.regs_launch * v.threads
            if asked > launched then
              problems[#problems + 1] = ("%s %s: %d registers asked, %d launched"):format(arch, v.name, asked,
                launched)
            end
          end
        end
      end
      assert.is_true(checked > 0, "some wgmma variant uses setmaxnreg")
      assert.are.same({}, problems)
    end)

    -- A cluster's blocks each multicast one part of B's slice: whole TMA
    -- chunks (128 bytes of rows, MN-major) and so whole 8-row swizzle
    -- groups (K-major).  Split K has no clustered form (a workspace slot per
    -- block).  And some clustered variant is kept, so that the GPU tests
    -- run the multicast path at all.
    it("the Hopper gemm kernel's clusters multicast whole chunks of B, never split K, and are built", function()
      local s = load_space("gemm")
      local problems, clustered = {}, 0
      for _, v in ipairs((enumerate(s, targets.get("sm_90")))) do
        if v.algo == "wgmma" and v.cluster > 1 then
          clustered = clustered + 1
          local part = v.bn // v.cluster
          if part % (128 // v.es) ~= 0 or v.split ~= 1 then
            problems[#problems + 1] = ("%s: %d rows of B per block, split %d"):format(v.name, part, v.split)
          end
        end
      end
      assert.is_true(clustered > 0, "some wgmma variant runs in clusters")
      assert.are.same({}, problems)
    end)
  end)

  describe("variant names", function()
    it("are C identifiers", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      for _, v in ipairs((enumerate(s, targets.get(arch)))) do
        if not v.name:match("^[%a_][%w_]*$") then problems[#problems + 1] = v.name end
      end
      end)
      assert.are.same({}, problems)
    end)

    it("are distinct for all configurations, kept or dropped, so a name fixes every parameter", function()
      local problems = {}
      local owner = {} -- across families too: the registry is one table
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        local kept, dropped = enumerate(s, targets.get("sm_90"))
        local all = {}
        for _, v in ipairs(kept) do all[#all + 1] = v end
        for _, d in ipairs(dropped) do all[#all + 1] = d.v end
        for _, v in ipairs(all) do
          local key = family .. "/" .. v.algo .. ":" .. key_of(kernel_of(s, v.algo), v)
          if owner[v.name] and owner[v.name] ~= key then
            problems[#problems + 1] = v.name .. " names both " .. owner[v.name] .. " and " .. key
          end
          owner[v.name] = key
        end
      end
      assert.are.same({}, problems)
    end)

    -- <family>_<algo>, then one token per parameter in the kernel's order:
    -- its tag and its value, with the values of the parameters that join it
    -- after an "x" (64x128x16).  So 8 is never found inside 128, nor "block"
    -- inside "blocked": each value is read at its own place.
    it("spell every parameter as its tag and value, in the kernel's order", function()
      local problems = {}
      each_space_and_target(function(family, s, arch)
      for _, v in ipairs((enumerate(s, targets.get(arch)))) do
        local k = kernel_of(s, v.algo)
        local tokens = {}
        for token in v.name:gmatch("[^_]+") do tokens[#tokens + 1] = token end
        local ok = tokens[1] == family and tokens[2] == v.algo
        local i, rest = 2, ""
        for _, p in ipairs(k.params) do
          local value = tostring(v[p[1]])
          local want
          if tags.silent(p, v) then
            want = "" -- at its legacy value a parameter adds no token
          elseif p.join then
            want = p.join .. value
          else
            ok = ok and rest == "" -- the previous token was read to its end
            i = i + 1
            rest = tokens[i] or ""
            want = p.tag .. value
          end
          ok = ok and rest:sub(1, #want) == want
          rest = rest:sub(#want + 1)
        end
        if not (ok and rest == "" and i == #tokens) then
          problems[#problems + 1] = ("%s does not spell %s"):format(v.name, key_of(k, v))
        end
      end
      end)
      assert.are.same({}, problems)
    end)

    it("are the same in every run and on every target", function()
      local problems = {}
      for _, family in ipairs(FAMILIES) do
        local name_of = {} -- configuration -> name, from the first run seen
        for _ = 1, 2 do
          local s = load_space_fresh(family) -- a fresh load: nothing carried over
          for _, arch in ipairs(TARGETS) do
            local kept, dropped = enumerate(s, targets.get(arch))
            local all = {}
            for _, v in ipairs(kept) do all[#all + 1] = v end
            for _, d in ipairs(dropped) do all[#all + 1] = d.v end
            for _, v in ipairs(all) do
              local key = v.algo .. ":" .. key_of(kernel_of(s, v.algo), v)
              if name_of[key] and name_of[key] ~= v.name then
                problems[#problems + 1] = ("%s is %s on %s but %s before"):format(key, v.name, arch, name_of[key])
              end
              name_of[key] = v.name
            end
          end
        end
      end
      assert.are.same({}, problems)
    end)

    it("are the file names the generator writes, for exactly the kept configurations", function()
      local problems = {}
      for _, arch in ipairs(TARGETS) do
        local expected = {}
        for _, family in ipairs(FAMILIES) do
          for _, v in ipairs((enumerate(load_space(family), targets.get(arch)))) do
            expected[family .. "/" .. v.name .. ".cu"] = true
          end
        end
        local written = {}
        for name, f in pairs(variants(arch)) do written[f.family .. "/" .. name .. ".cu"] = true end
        for path in pairs(expected) do
          if not written[path] then problems[#problems + 1] = arch .. ": not written: " .. path end
        end
        for path in pairs(written) do
          if not expected[path] then problems[#problems + 1] = arch .. ": written but not kept: " .. path end
        end
      end
      table.sort(problems)
      assert.are.same({}, problems)
    end)
  end)

  describe("generation", function()
    -- The header records the regenerate command, --out included, so the two
    -- runs use the same --out: the first tree is moved aside before the
    -- second run.
    it("is deterministic: two runs give byte-identical trees", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      ktgen_ok("--arch sm_90 --out " .. dir .. "/out --quiet")
      assert(os.rename(dir .. "/out", dir .. "/first"))
      ktgen_ok("--arch sm_90 --out " .. dir .. "/out --quiet")
      local first, second = tree(dir .. "/first"), tree(dir .. "/out")
      assert.is_true(count(first) > 0)
      assert.are.same({}, tree_diff(first, second))
    end)

    -- --only builds a subset; what it writes must be what the full run
    -- writes, byte for byte, so tuned entries (keyed by the file's hash)
    -- stay valid whichever way the variants were built.
    it("--only keeps the matching variants and the defaults, each file as the full run writes it", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      ktgen_ok("--arch sm_90 --out " .. dir .. "/out --quiet --only 'matmul_wt_64x128x16_*'")
      assert(os.rename(dir .. "/out", dir .. "/only"))
      ktgen_ok("--arch sm_90 --out " .. dir .. "/out --quiet")
      local only, full = tree(dir .. "/only"), tree(dir .. "/out")
      local want = {}
      for _, family in ipairs(FAMILIES) do
        for _, name in ipairs(load_space(family).defaults or {}) do want[family .. "/" .. name .. ".cu"] = true end
      end
      for path in pairs(full) do
        if path:match("^matmul/matmul_wt_64x128x16_.*%.cu$") then want[path] = true end
      end
      local problems = {}
      for path in pairs(want) do
        if only[path] == nil then problems[#problems + 1] = "missing: " .. path
        elseif only[path] ~= full[path] then problems[#problems + 1] = "differs from the full run: " .. path end
      end
      for path in pairs(only) do
        if path:match("%.cu$") and not want[path] then problems[#problems + 1] = "not selected: " .. path end
      end
      table.sort(problems)
      assert.are.same({}, problems)
      assert.is_true(count(want) > #FAMILIES * 2)
      assert.is_truthy(only["variants.mk"]:find("KT_GENERATED_ONLY := matmul_wt_64x128x16_*\n", 1, true))
      local code, _, err = ktgen("--arch sm_90 --out " .. dir .. "/bad --only 'matmul_wt_[12'")
      assert.are.equal(2, code)
      assert.is_truthy(err:find("bad --only pattern 'matmul_wt_[12'", 1, true), err)
      assert.is_false(exists(dir .. "/bad"))
    end)

    -- A warp tile whose block has fewer threads than a row of its B slice
    -- has copies (64 threads, 128 columns of 4-byte copies) gives each
    -- thread several column groups of every row; the space keeps it split
    -- through a workspace (16 or 256 ways), prunes it unsplit, and the
    -- other tiles pruning keeps have one column group.
    it("builds the 64-thread 32x128 tile of 4-byte copies with two column groups of B per thread", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local name = "matmul_wt_32x128x8_tt8x8_w4_s3_v1_g8_o0_k16_c1"
      local unsplit = "matmul_wt_32x128x8_tt8x8_w4_s3_v1_g8_o0_k1_c1"
      ktgen_ok("--arch sm_90 --out " .. dir .. "/all --quiet --no-prune --only '" .. unsplit .. "'")
      assert.is_truthy(tree(dir .. "/all")["matmul/" .. unsplit .. ".cu"], "not generated: " .. unsplit)
      ktgen_ok("--arch sm_90 --out " .. dir .. "/kept --quiet --only '" .. name .. "," .. unsplit ..
        ",matmul_wt_16x64x8_*'")
      local kept = tree(dir .. "/kept")
      local text = kept["matmul/" .. name .. ".cu"]
      assert.is_truthy(text, "not generated: " .. name)
      assert.is_truthy(text:find("constexpr int B_GROUPS = 2;", 1, true))
      assert.is_truthy(text:find("cp.b_bytes[j]", 1, true))
      assert.is_nil(kept["matmul/" .. unsplit .. ".cu"])
      local small = 0
      for path, body in pairs(kept) do
        if path:match("^matmul/matmul_wt_16x64x8_.*%.cu$") then
          small = small + 1
          assert.is_nil(body:find("B_GROUPS", 1, true), path)
        end
      end
      assert.is_true(small > 0)
    end)

    -- epi 1 is a twin: the same kernel but for the stores of unaligned rows
    -- of C, through shared memory (write_rows); never in a cluster, whose
    -- reduction stores C itself.  Its epi 0 twin is the kernel as it was.
    it("a warp tile of epi 1 stores unaligned rows through shared memory, its epi 0 twin as before", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local twin = "matmul_wt_64x128x8_tt8x8_w4_s3_v1_g8_o4_k1_c1"
      ktgen_ok("--arch sm_90 --out " .. dir .. " --quiet --only '" .. twin .. "," .. twin .. "_e1'")
      local files = tree(dir)
      local e0, e1 = files["matmul/" .. twin .. ".cu"], files["matmul/" .. twin .. "_e1.cu"]
      assert.is_truthy(e0 and e1, "not generated: " .. twin .. " and its _e1 twin")
      assert.is_nil(e0:find("write_rows", 1, true))
      assert.is_truthy(e1:find("write_rows(acc, smem + warp * (WTM * WN)", 1, true))
      for _, v in ipairs((enumerate(load_space("matmul"), targets.get("sm_90")))) do
        if v.epi == 1 then assert.are.equal(1, v.cluster, v.name) end
      end
    end)

    -- The same globs as the tuner's --variants (fnmatch(3), flags 0), each
    -- matching a whole name; checked here against names the spaces make.
    it("--only takes comma-separated shell globs, each matching a whole name", function()
      local names = {}
      for _, family in ipairs(FAMILIES) do
        for _, v in ipairs((enumerate(load_space(family), targets.get("sm_90")))) do names[#names + 1] = v.name end
      end
      local function selected(globs)
        local list = assert(glob.list(globs))
        local out = {}
        for _, name in ipairs(names) do
          if glob.any(list, name) then out[#out + 1] = name end
        end
        return out
      end
      local function all(pred)
        local out = {}
        for _, name in ipairs(names) do
          if pred(name) then out[#out + 1] = name end
        end
        return out
      end
      local function starts(prefix) return function(name) return name:sub(1, #prefix) == prefix end end
      -- * matches any run, also none; a glob matches the whole name, not a part.
      assert.are.same(all(starts("hist_band_")), selected("hist_band_*"))
      assert.are.same({}, selected("hist_band_"))
      assert.are.same({}, selected("band*"))
      assert.are.same(all(function(n) return n:find("_cyclic_", 1, true) ~= nil end), selected("*_cyclic_*"))
      -- ? is one character; [...] a set, [!...] its complement, with ranges and classes.
      assert.are.same(all(function(n) return n:match("^hist_dsm_c%d_") ~= nil end), selected("hist_dsm_c?_*"))
      assert.are.same(all(function(n) return n:match("^hist_dsm_c[24]_") ~= nil end), selected("hist_dsm_c[24]_*"))
      assert.are.same(all(function(n) return n:match("^hist_dsm_c[2-4]_") ~= nil end), selected("hist_dsm_c[2-4]_*"))
      assert.are.same(all(function(n) return n:match("^hist_dsm_c[^1]") ~= nil end), selected("hist_dsm_c[!1]*"))
      assert.are.same(all(function(n) return n:match("^hist_dsm_c%d%d_") ~= nil end),
        selected("hist_dsm_c[[:digit:]][[:digit:]]_*"))
      -- Several globs, blanks around them ignored: the union.
      local union = all(function(n) return starts("hist_band_")(n) or starts("hist_global_")(n) end)
      assert.are.same(union, selected(" hist_band_* , hist_global_*"))
      -- Lua's magic characters are plain: . is a dot, not any character.
      assert.are.same({}, selected("hist.band_*"))
      assert.is_truthy(("a.b%c-d+e"):match(assert(glob.pattern("a.b%c-d+e"))))
      assert.is_falsy(("aXb%c-d+e"):match(assert(glob.pattern("a.b%c-d+e"))))
      assert.is_truthy(("a*b"):match(assert(glob.pattern("a\\*b"))))
      assert.is_falsy(("axb"):match(assert(glob.pattern("a\\*b"))))
      assert.is_truthy(("]"):match(assert(glob.pattern("[]]"))))
      -- What fnmatch would read otherwise, or not at all, is refused.
      for _, bad in ipairs({ "a[bc", "a[!", "x[[:nope:]]", "x[z-a]", "x\\" }) do
        assert.is_nil(glob.list(bad), bad)
      end
    end)

    it("--only warns about a glob that matches nothing, and when nothing matched at all", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local code, _, err = ktgen("--arch sm_90 --out " .. dir .. "/a --quiet --only 'hist_band_*,nothing_*'")
      assert.are.equal(0, code)
      assert.is_truthy(err:find("warning: --only 'nothing_*' matched no variant", 1, true), err)
      assert.is_falsy(err:find("hist_band_*", 1, true), err)
      code, _, err = ktgen("--arch sm_90 --out " .. dir .. "/b --quiet --only 'nothing_*'")
      assert.are.equal(0, code)
      assert.is_truthy(err:find("--only matched no variant; only the defaults are kept", 1, true), err)
    end)

    -- --no-prune adds the pruned variants; the others keep their files byte
    -- for byte (tuned entries stay valid), and the defaults stay the same.
    it("--no-prune also writes what pruning drops, each other file as the pruned run writes it", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local arch = "sm_86"
      ktgen_ok("--arch " .. arch .. " --out " .. dir .. "/out --quiet --no-prune")
      assert(os.rename(dir .. "/out", dir .. "/all"))
      ktgen_ok("--arch " .. arch .. " --out " .. dir .. "/out --quiet")
      local all, pruned = tree(dir .. "/all"), tree(dir .. "/out")
      local want = {} -- path -> true for what only --no-prune writes
      for _, family in ipairs(FAMILIES) do
        local _, dropped = enumerate(load_space(family), targets.get(arch))
        for _, d in ipairs(dropped) do
          if d.kind == "prune" then want[family .. "/" .. d.v.name .. ".cu"] = true end
        end
      end
      local problems = {}
      for path, text in pairs(pruned) do
        if path:match("%.cu$") and all[path] ~= text then problems[#problems + 1] = "differs: " .. path end
      end
      for path, text in pairs(all) do
        if path:match("%.cu$") and not pruned[path] then
          if not want[path] then problems[#problems + 1] = "not pruned, yet only in --no-prune: " .. path end
          want[path] = nil
          local h = parse_header(text)
          if not (h and h.command == "lua5.4 generator/ktgen.lua --arch " .. arch .. " --out " .. dir ..
            "/out --no-prune") then
            problems[#problems + 1] = path .. ": header command " .. tostring(h and h.command)
          end
        end
      end
      for path in pairs(want) do problems[#problems + 1] = "pruned, yet not written: " .. path end
      local function defaults(registry_c)
        local out = {}
        for name, e in pairs((parse_registry(registry_c))) do
          if tonumber(e.default_rank) > 0 then out[#out + 1] = e.default_rank .. " " .. name end
        end
        table.sort(out)
        return table.concat(out, ", ")
      end
      table.sort(problems)
      assert.are.same({}, problems)
      assert.is_true(count(all) > count(pruned))
      assert.are.equal(defaults(pruned["registry.c"]), defaults(all["registry.c"]))
      assert.is_truthy(all["variants.mk"]:find("\nKT_GENERATED_NO_PRUNE := 1\n", 1, true))
      assert.is_truthy(pruned["variants.mk"]:find("\nKT_GENERATED_NO_PRUNE := \n", 1, true))
    end)

    it("writes every file on the first run and rewrites none on a rerun", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local out = dir .. "/out"
      local first = ktgen_ok("--arch sm_90 --out " .. out)
      local before = tree(out)
      assert.are.equal(count(before), tonumber(first:match("%((%d+) file%(s%) rewritten%)")))
      local again = ktgen_ok("--arch sm_90 --out " .. out)
      assert.is_truthy(again:find("(0 file(s) rewritten)", 1, true), again)
      assert.are.same({}, tree_diff(before, tree(out)))
    end)

    it("is reproduced by the command written in every header", function()
      local dir = TREE.sm_90.dir
      local commands = {}
      for _, f in pairs(variants("sm_90")) do commands[parse_header(f.text).command] = true end
      assert.are.same({ ["lua5.4 generator/ktgen.lua --arch sm_90 --out " .. dir] = true }, commands)
      local command = next(commands)
      local p = assert(io.popen(command .. " 2>&1"))
      local out = p:read("a")
      assert.is_true(p:close(), out)
      assert.is_truthy(out:find("(0 file(s) rewritten)", 1, true), out)
      assert.are.same({}, tree_diff(TREE.sm_90.files, tree(dir)))
    end)

    it("generates the whole space in under 2 s", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local p = assert(io.popen("s=$(date +%s%N); " .. LUA .. " generator/ktgen.lua --arch sm_90 --out " .. dir ..
        "/out --quiet >/dev/null 2>&1; rc=$?; e=$(date +%s%N); echo $rc $((e - s))"))
      local rc, ns = p:read("a"):match("^(%d+) (%d+)")
      p:close()
      assert.are.equal("0", rc)
      assert.is_true(count(tree(dir .. "/out")) > 0)
      local seconds = tonumber(ns) / 1e9
      assert.is_true(seconds < 2, ("took %.3f s"):format(seconds))
    end)
  end)

  describe("file headers", function()
    it("start every .cu and list the template, version, target and every parameter", function()
      local problems = {}
      local function check(cond, what) if not cond then problems[#problems + 1] = what end end
      for _, arch in ipairs(TARGETS) do
        local files = variants(arch)
        for _, family in ipairs(FAMILIES) do
          local s = load_space(family)
          for _, v in ipairs((enumerate(s, targets.get(arch)))) do
            local where = arch .. " " .. v.name .. ": "
            local f = files[v.name]
            local h = f and parse_header(f.text)
            check(h, where .. "no file, or no header at its top")
            if h then
              check(h.version == registry.VERSION, where .. "version " .. tostring(h.version))
              check(h.template == kernel_of(s, v.algo).template, where .. "template " .. tostring(h.template))
              check(h.target == arch, where .. "target " .. tostring(h.target))
              check(h.variant == v.name, where .. "variant " .. tostring(h.variant))
              check(h.family == family and h.algo == v.algo, where .. "family line")
              local k = kernel_of(s, v.algo)
              local shown = {} -- a parameter at its legacy value has no line
              for _, p in ipairs(k.params) do
                if not tags.silent(p, v) then shown[#shown + 1] = p end
              end
              check(#h.params == #shown, where .. ("%d parameter lines for %d parameters"):format(
                #h.params, #shown))
              for i, p in ipairs(shown) do
                local got = h.params[i] or {}
                check(got[1] == p[1] and got[2] == tostring(v[p[1]]) and got[3] == p[3],
                  where .. ("parameter %d: expected %s = %s (%s), got %s"):format(
                    i, p[1], tostring(v[p[1]]), p[3], table.concat(got, " | ")))
              end
              check(tonumber(h.threads) == v.threads and tonumber(h.smem_static) == v.smem_static and
                tonumber(h.smem_dynamic) == v.smem_dynamic and tonumber(h.cluster) == v.cluster,
                where .. "launch needs line")
            end
          end
        end
      end
      assert.are.same({}, problems)
    end)
  end)

  -- A name's tags read the same in every family (generator/tags.lua).
  describe("tags", function()
    it("mean one thing in every family: each belongs to one parameter, which has that tag everywhere", function()
      local problems, param_of, tag_of = {}, {}, {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        for _, k in ipairs(s.kernels) do
          for j, p in ipairs(k.params) do
            local where = family .. "/" .. k.algo .. " " .. p[1] .. ": "
            local tag = p.tag
            if p.join then
              if j == 1 or tag ~= nil or p.join ~= "x" then problems[#problems + 1] = where .. "bad join" end
            elseif tag == nil then
              problems[#problems + 1] = where .. "no tag"
            elseif tag == "" then
              if not tags.bare[p[1]] then problems[#problems + 1] = where .. "no tag, and not listed as bare" end
            elseif not tags.list[tag] then
              problems[#problems + 1] = where .. "tag " .. tag .. " is not in generator/tags.lua"
            elseif tags.list[tag][1] ~= p[1] then
              problems[#problems + 1] = where .. "tag " .. tag .. " belongs to " .. tags.list[tag][1]
            end
            if tag and tag ~= "" then
              if param_of[tag] and param_of[tag] ~= p[1] then
                problems[#problems + 1] = where .. "tag " .. tag .. " also spells " .. param_of[tag]
              end
              param_of[tag] = p[1]
            end
            if not p.join then
              if tag_of[p[1]] and tag_of[p[1]] ~= tag then
                problems[#problems + 1] = where .. "spelled " .. tostring(tag) .. " here, " .. tag_of[p[1]] .. " elsewhere"
              end
              tag_of[p[1]] = tag
            end
          end
        end
      end
      for tag, entry in pairs(tags.list) do
        if not tag:match("^%l%l?%l?$") then problems[#problems + 1] = "tag '" .. tag .. "' is not 1-3 letters" end
        if type(entry[2]) ~= "string" or entry[2] == "" then problems[#problems + 1] = tag .. " has no meaning" end
        if not param_of[tag] then problems[#problems + 1] = "tag " .. tag .. " (" .. entry[1] .. ") is used nowhere" end
      end
      table.sort(problems)
      assert.are.same({}, problems)
    end)

    it("are checked by the generator: unknown, taken by another parameter, missing, or a join out of place",
      function()
      assert.is_nil(tags.check({ "threads", { 256 }, "m", tag = "t" }))
      assert.is_nil(tags.check({ "layout", { "cyclic" }, "m", tag = "" }))
      assert.is_nil(tags.check({ "bn", { 64 }, "m", join = "x" }, { "bm", { 32 }, "m", tag = "" }))
      assert.matches("tag 'zq' is not in generator/tags.lua", tags.check({ "rep", { 1 }, "m", tag = "zq" }), 1, true)
      assert.matches("tag 't' means threads per block", tags.check({ "tt", { "8x8" }, "m", tag = "t" }), 1, true)
      assert.matches("has no tag", tags.check({ "rep", { 1 }, "m" }), 1, true)
      assert.matches("has no tag, which only", tags.check({ "rep", { 1 }, "m", tag = "" }), 1, true)
      assert.matches("it is the first", tags.check({ "bn", { 64 }, "m", join = "x" }), 1, true)
    end)
  end)

  describe("templates", function()
    it("are one per kernel: each kernel names one that exists, the family none, and no template is unused",
      function()
      local problems, named = {}, {}
      for _, family in ipairs(FAMILIES) do
        local s = load_space(family)
        if s.template ~= nil then problems[#problems + 1] = family .. " names a family-wide template" end
        for _, k in ipairs(s.kernels) do
          local path = k.template
          if type(path) ~= "string" then
            problems[#problems + 1] = family .. "/" .. tostring(k.algo) .. " names no template"
          elseif not path:match("^templates/[%w_]+%.cu%.tpl$") or not read(path) then
            problems[#problems + 1] = family .. "/" .. k.algo .. ": no template " .. path
          elseif named[path] then
            problems[#problems + 1] = path .. " is named by " .. named[path] .. " and " .. family .. "/" .. k.algo
          else
            named[path] = family .. "/" .. k.algo
          end
        end
      end
      local p = assert(io.popen("ls templates"))
      for name in p:lines() do
        if name:match("%.cu%.tpl$") and not named["templates/" .. name] then
          problems[#problems + 1] = "templates/" .. name .. " is named by no kernel"
        end
      end
      p:close()
      assert.are.same({}, problems)
    end)

    -- A shared header is part of every kernel that includes it: its hash is
    -- in the kernel's header, so the source hash moves when it does.  What
    -- a variant includes is read from its generated code, since a template
    -- may pick the header per variant (matmul's stream parameter).
    it("have the shared headers they include hashed into each generated file", function()
      local problems, checked = {}, 0
      for name, f in pairs(variants("sm_90")) do
        local h = parse_header(f.text)
        local want = {}
        for inc in h.body:gmatch('#include "([%w_]+%.cuh)"') do
          want["templates/" .. inc] = fnv1a64(without_spdx(assert(read("templates/" .. inc))))
        end
        if count(want) > 0 then checked = checked + 1 end
        if table.concat(sorted_keys(want), " ") ~= table.concat(sorted_keys(h.includes), " ") then
          problems[#problems + 1] = name .. ": includes " .. table.concat(sorted_keys(h.includes), " ")
        end
        for path, hash in pairs(want) do
          if h.includes[path] ~= hash then problems[#problems + 1] = name .. ": hash of " .. path end
          if not f.text:find('\n#include "' .. path:match("[^/]+$") .. '"\n', 1, true) then
            problems[#problems + 1] = name .. " does not include " .. path
          end
        end
      end
      assert.is_true(checked > 0)
      assert.are.same({}, problems)
      local mk = TREE.sm_90.files["variants.mk"]
      assert.is_truthy(mk:find("\nKT_INCLUDES_hist := templates/hist_common.cuh\n", 1, true), mk)
    end)
  end)

  -- A parameter added to a kernel after it was tuned, with a legacy value
  -- (generator/tags.lua, tags.silent): at that value the kernel's variants
  -- keep their files byte for byte (so their source hashes), and the other
  -- values are new variants, named and listed as usual.
  describe("a parameter with a legacy value", function()
    it("leaves the variants at that value as they were and adds the others", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local tdir, out = dir .. "/templates", dir .. "/out"
      assert(os.execute("cp -r templates '" .. tdir .. "'"))
      local args = "--arch sm_90 --templates " .. tdir .. " --out " .. out .. " --quiet"
      ktgen_ok(args)
      local before = tree(out)

      -- hist's global-atomics kernel gains the parameter; its template
      -- includes a header of the templates folder only where it is 1.
      local space_path, tpl_path = tdir .. "/hist.space.lua", tdir .. "/hist_global.cu.tpl"
      local lines = lines_of(read(space_path))
      local at
      for i, line in ipairs(lines) do
        if line:find('algo = "global"', 1, true) then at = i end
        if at and i > at and line:find("params = {", 1, true) then at = i; break end
      end
      table.insert(lines, at + 1, '        { "stream", { 0, 1 }, "a test of legacy values", tag = "ls", legacy = 0 },')
      write(space_path, table.concat(lines, "\n") .. "\n")
      local tpl = read(tpl_path)
      local inc = '#include "kt_launch.h"\n'
      assert(tpl:find(inc, 1, true))
      write(tpl_path, (tpl:gsub(escape_pattern(inc),
        function() return [[#include "$(stream == 1 and 'extra.cuh' or 'kt_launch.h')"]] .. "\n" end, 1)))
      write(tdir .. "/extra.cuh", '/* SPDX-License-Identifier: MIT */\n#include "kt_launch.h"\n')
      ktgen_ok(args)
      local after = tree(out)

      local added, changed = {}, {}
      for _, line in ipairs(tree_diff(before, after)) do
        local kind, path = line:match("^(.-): (.*)$")
        if kind == "only in the second" then added[#added + 1] = path
        elseif path:match("%.cu$") then changed[#changed + 1] = line end
      end
      assert.are.same({}, changed) -- every variant file that was there is byte for byte the same
      local old_global = {}
      for path in pairs(before) do
        if path:match("^hist/hist_global_.*%.cu$") then old_global[#old_global + 1] = path end
      end
      table.sort(old_global)
      assert.is_true(#old_global > 0)
      local want = {}
      for _, path in ipairs(old_global) do -- the parameter is the kernel's first: its token comes first
        want[#want + 1] = (path:gsub("^hist/hist_global_", "hist/hist_global_ls1_"))
      end
      table.sort(added)
      assert.are.same(want, added)
      local text = after[added[1]]
      local h = parse_header(text)
      assert.are.equal(fnv1a64(without_spdx(read(tdir .. "/extra.cuh"))), h.includes[tdir .. "/extra.cuh"])
      assert.are.same({ "stream", "1", "a test of legacy values" }, h.params[1])
      assert.is_truthy(h.body:find('#include "extra.cuh"', 1, true))
    end)

    it("is one of the parameter's values, and the parameter has a tag of its own", function()
      local k = { params = { { "stream", { 0, 1 }, "x", tag = "ls", legacy = 2 } } }
      assert.is_truthy(tags.check(k.params[1], nil):find("legacy value is not one of its values", 1, true))
      local joined = { "bk", { 8 }, "x", join = "x", legacy = 8 }
      assert.is_truthy(tags.check(joined, { "bm", { 8 }, "y", tag = "" }):find("needs a tag of its own", 1, true))
      assert.is_nil(tags.check({ "stream", { 0, 1 }, "x", tag = "ls", legacy = 0 }, nil))
    end)
  end)

  -- The one constant in generator/registry.lua against the one in
  -- runtime/kt_variant.h; no template states it.
  describe("the ABI guard", function()
    local function guard_abi(text)
      local n = text:match('\n#include "kt_variant.h"\n#if KT_ABI_VERSION != (%d+)\n#error "[^"\n]*"\n#endif\n')
      return tonumber(n)
    end

    it("is the runtime's KT_ABI_VERSION", function()
      local runtime = tonumber(read("runtime/kt_variant.h"):match("\n#define KT_ABI_VERSION (%d+)\n"))
      assert.is_not_nil(runtime)
      assert.are.equal(runtime, registry.ABI)
    end)

    it("is in every generated C and CUDA file, before the template's code, and in no template", function()
      local problems = {}
      for _, arch in ipairs(TARGETS) do
        for path, text in pairs(TREE[arch].files) do
          if path:match("%.cu$") then
            local h = parse_header(text)
            if not (h and h.prologue and guard_abi("\n" .. h.prologue) == registry.ABI) then
              problems[#problems + 1] = arch .. " " .. path .. ": no guard between the header and the body"
            end
          elseif path:match("%.[ch]$") and guard_abi(text) ~= registry.ABI then
            problems[#problems + 1] = arch .. " " .. path .. ": no guard"
          end
        end
      end
      local p = assert(io.popen("ls templates"))
      for name in p:lines() do
        if (read("templates/" .. name) or ""):find("KT_ABI_VERSION", 1, true) then
          problems[#problems + 1] = "templates/" .. name .. " states the ABI version"
        end
      end
      p:close()
      assert.are.same({}, problems)
    end)
  end)

  describe("registry", function()
    it("computes FNV-1a 64 the standard way (checks the test's own hash)", function()
      assert.are.equal("cbf29ce484222325", fnv1a64(""))
      assert.are.equal("af63dc4c8601ec8c", fnv1a64("a"))
      assert.are.equal("85944171f73967e8", fnv1a64("foobar"))
    end)

    it("has one entry per .cu, with its hash, launcher, kernel and parameters", function()
      local FAMILY_ENUM = {}
      for _, family in ipairs(FAMILIES) do FAMILY_ENUM[family] = "KT_FAMILY_" .. family:upper() end
      local problems = {}
      local function check(cond, what) if not cond then problems[#problems + 1] = what end end
      for _, arch in ipairs(TARGETS) do
        local files = variants(arch)
        local entries, seen = parse_registry(TREE[arch].files["registry.c"])
        for name, n in pairs(seen) do
          check(n == 1, arch .. ": " .. name .. " has " .. n .. " registry entries")
          check(files[name], arch .. ": registry entry " .. name .. " has no .cu")
        end
        for name, f in pairs(files) do
          local where = arch .. " " .. name .. ": "
          local e = entries[name]
          check(e, where .. "no registry entry")
          if e then
            check(e.source_hash and e.source_hash:match("^" .. ("%x"):rep(16) .. "$") and
              e.source_hash == e.source_hash:lower(), where .. "hash is not 16 lowercase hex digits")
            local code = without_spdx(f.text):gsub(escape_pattern(registry.abi_guard()), "", 1)
            check(e.source_hash == fnv1a64(code), where .. "source_hash is not FNV-1a of the file " ..
              "less its licence line and ABI guard")
            check(e.launch == "kt_launch_" .. name, where .. "launch = " .. tostring(e.launch))
            check(e.family == FAMILY_ENUM[f.family], where .. "family = " .. tostring(e.family))
            -- The registry lists every parameter; the header leaves out
            -- those at their legacy value (tags.silent).
            local h = parse_header(f.text)
            local k = h and kernel_of(load_space(f.family), h.algo) or { params = {} }
            local listed = {}
            for _, p in ipairs(e.params) do
              local spec
              for _, q in ipairs(k.params) do if q[1] == p[1] then spec = q end end
              if not (spec and spec.legacy ~= nil and tostring(spec.legacy) == p[2]) then listed[#listed + 1] = p end
            end
            local same = h and #h.params == #listed
            for i, p in ipairs(h and h.params or {}) do
              same = same and listed[i] and listed[i][1] == p[1] and listed[i][2] == p[2]
            end
            check(same, where .. "registry parameters differ from the header's")
          end
          check(f.text:find('\nextern "C" int kt_launch_' .. name .. "%(const void %*args, cudaStream_t stream%)\n"),
            where .. "kt_launch_" .. name .. " is not defined in the .cu")
          check(f.text:find("__global__[^;{}]-%f[%w_]" .. name .. "%("),
            where .. "kernel " .. name .. " is not defined in the .cu")
        end
      end
      assert.are.same({}, problems)
    end)

    it("variants.mk and registry.h list the same variants and target", function()
      local problems = {}
      for _, arch in ipairs(TARGETS) do
        local files = TREE[arch].files
        local listed, mk_arch = parse_variants_mk(files["variants.mk"])
        local on_disk = {}
        for name, f in pairs(variants(arch)) do on_disk[f.family .. "/" .. name] = true end
        if table.concat(sorted_keys(listed), " ") ~= table.concat(sorted_keys(on_disk), " ") then
          problems[#problems + 1] = arch .. ": variants.mk does not list exactly the .cu files"
        end
        if mk_arch ~= arch then problems[#problems + 1] = arch .. ": KT_GENERATED_ARCH = " .. tostring(mk_arch) end
        if not files["registry.h"]:find('#define KT_TARGET_ARCH "' .. arch .. '"', 1, true) then
          problems[#problems + 1] = arch .. ": registry.h names another target"
        end
      end
      assert.are.same({}, problems)
    end)
  end)

  describe("#line directives", function()
    local function each_tpl_line(fn)
      local tpl_cache = {}
      for _, arch in ipairs(TARGETS) do
        for name, f in pairs(variants(arch)) do
          local h = parse_header(f.text)
          tpl_cache[h.template] = tpl_cache[h.template] or lines_of(assert(read(h.template)))
          fn(arch .. " " .. name, h, lines_of(h.body), tpl_cache[h.template])
        end
      end
    end

    local function follows(line, tpl_line)
      if tpl_line == nil then return false end
      if not tpl_line:find("$(", 1, true) then return line == tpl_line end
      return line:match(expansion_pattern(tpl_line)) ~= nil
    end

    it("are each followed by line N of the template they name", function()
      local problems, directives = {}, 0
      each_tpl_line(function(where, h, body, tpl)
        for i, line in ipairs(body) do
          local n, path = line:match('^#line (%d+) "([^"]+)"$')
          if n then
            directives = directives + 1
            n = tonumber(n)
            if path ~= h.template then
              problems[#problems + 1] = where .. ": #line names " .. path
            elseif not follows(body[i + 1], tpl[n]) then
              problems[#problems + 1] = ("%s: after #line %d: %q, template has %q"):format(
                where, n, tostring(body[i + 1]), tostring(tpl[n]))
            end
          end
        end
      end)
      assert.is_true(directives > 0)
      assert.are.same({}, problems)
    end)

    it("are needed only where the output stops following the template line by line", function()
      -- After each directive, the next lines are template lines N, N+1, ...
      -- until the next directive: every output line maps to its source.
      local problems = {}
      each_tpl_line(function(where, h, body, tpl)
        local n
        for _, line in ipairs(body) do
          local d = line:match('^#line (%d+) "')
          if d then
            if n and tonumber(d) == n then problems[#problems + 1] = where .. ": needless #line " .. d end
            n = tonumber(d)
          elseif not n or not follows(line, tpl[n]) then
            problems[#problems + 1] = ("%s: %q is not template line %s"):format(where, line, tostring(n))
            return
          else
            n = n + 1
          end
        end
      end)
      assert.are.same({}, problems)
    end)
  end)

  describe("the target", function()
    it("decides whether cluster (hist dsm) variants exist: none on sm_80, some on sm_90", function()
      local function dsm_count(arch)
        local n = 0
        for _, e in pairs((parse_registry(TREE[arch].files["registry.c"]))) do
          if e.algo == "dsm" or tonumber(e.cluster) > 1 then n = n + 1 end
        end
        return n
      end
      assert.are.equal(0, dsm_count("sm_80"))
      assert.is_true(dsm_count("sm_90") > 0)
    end)

    it("bounds every variant's cluster, compute capability, threads and shared memory", function()
      local problems = {}
      for _, arch in ipairs(TARGETS) do
        local t = targets.get(arch)
        local clustered = 0
        for name, e in pairs((parse_registry(TREE[arch].files["registry.c"]))) do
          local n = {}
          for _, f in ipairs({ "threads", "cluster", "min_cc", "smem_static", "smem_dynamic", "counter_bits",
            "copies", "banded" }) do
            n[f] = tonumber(e[f])
          end
          local where = arch .. " " .. name .. ": "
          if n.cluster > 1 then clustered = clustered + 1 end
          if n.cluster > t.max_cluster then problems[#problems + 1] = where .. "cluster " .. n.cluster end
          if n.min_cc > t.cc then problems[#problems + 1] = where .. "needs cc " .. n.min_cc end
          if n.threads > t.max_threads then problems[#problems + 1] = where .. n.threads .. " threads" end
          if n.smem_static + n.smem_dynamic > t.smem_optin then
            problems[#problems + 1] = where .. (n.smem_static + n.smem_dynamic) .. " B shared memory"
          end
          -- Histogram counters: none, or 16 or 32 bits, in at least one copy.
          if e.family == "KT_FAMILY_HIST" then
            if n.counter_bits ~= 0 and n.counter_bits ~= 16 and n.counter_bits ~= 32 then
              problems[#problems + 1] = where .. n.counter_bits .. "-bit counters"
            end
            if n.copies < 1 then problems[#problems + 1] = where .. n.copies .. " copies" end
          end
        end
        if not t.clusters and clustered > 0 then
          problems[#problems + 1] = arch .. " has no clusters but " .. clustered .. " clustered variants"
        end
        if t.clusters and clustered == 0 then problems[#problems + 1] = arch .. " has clusters but no clustered variant" end
      end
      assert.are.same({}, problems)
    end)

    it("switched in place removes the variants the new target does not have", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      ktgen_ok("--arch sm_80 --out " .. dir .. "/out --quiet")
      assert(os.rename(dir .. "/out", dir .. "/fresh"))
      ktgen_ok("--arch sm_90 --out " .. dir .. "/out --quiet")
      ktgen_ok("--arch sm_80 --out " .. dir .. "/out --quiet")
      assert.are.same({}, tree_diff(tree(dir .. "/fresh"), tree(dir .. "/out")))
    end)
  end)

  -- A build for several targets (make ARCHS="sm_80 sm_90"): one file per
  -- variant, compiled for the targets that keep it; per target, the
  -- registry entries that a build for that target alone has.
  describe("several targets", function()
    -- The single-target builds into the same folder first: the command in
    -- a header names the folder, and so enters the source hash.
    local MULTI -- { dir, files, stdout }
    local SINGLE = {} -- arch -> { files = tree }
    setup(function()
      MULTI = { dir = ROOT .. "/multi" }
      for _, arch in ipairs({ "sm_80", "sm_90" }) do
        ktgen_ok("--arch " .. arch .. " --out " .. MULTI.dir .. " --quiet")
        SINGLE[arch] = { files = tree(MULTI.dir) }
      end
      MULTI.stdout = ktgen_ok("--arch sm_90,sm_80 --out " .. MULTI.dir)
      MULTI.files = tree(MULTI.dir)
    end)

    -- Registry entries as a list (a name has one per target).
    local function entries_of(text)
      local out = {}
      for name, fields in text:gmatch('%{ %.name = "([^"]*)",(.-) %},\n') do
        local e = { name = name }
        for field, value in fields:gmatch("%.([%w_]+) = ([^,]+)") do e[field] = value:gsub('^"(.*)"$', "%1") end
        if e.family then out[#out + 1] = e end -- not kt_registry_targets'
      end
      return out
    end
    -- What follows the DO-NOT-EDIT block: the ABI guard and the kernel.
    local function code_of(text)
      return without_spdx(text):match("^/%*.-%*/\n(.*)$")
    end

    it("writes each variant once, for the targets whose spaces keep it, with the code each of them generates", function()
      local problems, shared = {}, 0
      local want = {} -- path -> list of targets
      for _, arch in ipairs({ "sm_80", "sm_90" }) do
        for path in pairs(SINGLE[arch].files) do
          if path:match("%.cu$") then
            want[path] = want[path] or {}
            table.insert(want[path], arch)
          end
        end
      end
      for path, archs in pairs(want) do
        local text = MULTI.files[path]
        local h = text and parse_header(text)
        if not h then
          problems[#problems + 1] = path .. ": missing or without a header"
        else
          if h.target ~= table.concat(archs, " ") then
            problems[#problems + 1] = path .. ": target " .. tostring(h.target) .. ", kept by " .. table.concat(archs, " ")
          end
          for _, arch in ipairs(archs) do
            if code_of(text) ~= code_of(SINGLE[arch].files[path]) then
              problems[#problems + 1] = path .. ": code differs from the " .. arch .. " build's"
            end
          end
          if #archs > 1 then shared = shared + 1 end
        end
      end
      for path in pairs(MULTI.files) do
        if path:match("%.cu$") and not want[path] then problems[#problems + 1] = path .. ": kept by no target" end
      end
      assert.is_true(shared > 0, "no variant is shared by sm_80 and sm_90")
      assert.are.same({}, problems)
    end)

    it("registers each variant once per target, with that target's facts and source hash, newest target first", function()
      local all = entries_of(MULTI.files["registry.c"])
      local problems, last_cc = {}, math.huge
      for _, arch in ipairs({ "sm_80", "sm_90" }) do
        local cc = targets.get(arch).cc
        local single = parse_registry(SINGLE[arch].files["registry.c"])
        local seen = {}
        for _, e in ipairs(all) do
          if tonumber(e.target) == cc then
            seen[e.name] = true
            local s1 = single[e.name]
            if not s1 then
              problems[#problems + 1] = arch .. " " .. e.name .. ": not in the " .. arch .. " build"
            else
              for field, value in pairs(s1) do
                if field ~= "params" and e[field] ~= value then
                  problems[#problems + 1] = ("%s %s: %s = %s, the %s build has %s"):format(
                    arch, e.name, field, tostring(e[field]), arch, tostring(value))
                end
              end
            end
          end
        end
        for name in pairs(single) do
          if not seen[name] then problems[#problems + 1] = arch .. " " .. name .. ": no entry" end
        end
      end
      for _, e in ipairs(all) do
        if tonumber(e.target) > last_cc then problems[#problems + 1] = e.name .. ": an older target's entry first" end
        last_cc = tonumber(e.target)
      end
      local text = MULTI.files["registry.c"]
      assert.is_truthy(text:find('{ .name = "sm_80", .cc = 80, .exact = 0 }', 1, true))
      assert.is_truthy(text:find('{ .name = "sm_90", .cc = 90, .exact = 0 }', 1, true))
      assert.is_truthy(text:find('kt_registry_target[] = "sm_80 sm_90";', 1, true))
      assert.are.same({}, problems)
    end)

    it("lists in variants.mk the variants of each target, and the arch list", function()
      local mk = MULTI.files["variants.mk"]:gsub("\\\n", " ")
      for _, arch in ipairs({ "sm_80", "sm_90" }) do
        local want = parse_variants_mk(SINGLE[arch].files["variants.mk"])
        local got = {}
        for item in (mk:match("KT_TARGET_VARIANTS_" .. arch .. " := ([^\n]*)") or ""):gmatch("%S+") do got[item] = true end
        assert.are.same(want, got)
      end
      assert.is_truthy(mk:find("KT_GENERATED_ARCH := sm_80 sm_90\n", 1, true))
    end)

    it("is reproduced by the command written in every header", function()
      local commands = {}
      for path, text in pairs(MULTI.files) do
        if path:match("%.cu$") then commands[parse_header(text).command] = true end
      end
      assert.are.same({ ["lua5.4 generator/ktgen.lua --arch sm_80,sm_90 --out " .. MULTI.dir] = true }, commands)
      local out = ktgen_ok("--arch 'sm_80 sm_90' --out " .. MULTI.dir)
      assert.is_truthy(out:find("(0 file(s) rewritten)", 1, true), out)
    end)

    it("--check reports each family for each target and writes nothing", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      local out = ktgen_ok("--arch sm_80,sm_90 --check --out " .. dir .. "/out")
      for _, family in ipairs(FAMILIES) do
        for _, arch in ipairs({ "sm_80", "sm_90" }) do
          assert.is_truthy(out:find(family .. ": %d+ variants kept, %d+ dropped %(target " .. arch .. "%)"), out)
        end
      end
      assert.is_false(exists(dir .. "/out"))
    end)

    it("refuses an unknown target, or two of one compute capability, with one message, writing nothing", function()
      local dir = mkdtemp()
      finally(function() rm_tree(dir) end)
      for list, msg in pairs({ ["sm_80,sm_75x"] = "'sm_75x' is not a target",
                               ["sm_100"] = "'sm_100' is not a target",
                               ["sm_90,sm_90a"] = "sm_90 and sm_90a are both compute capability 9.0" }) do
        local code, _, err = ktgen("--arch " .. list .. " --out " .. dir .. "/out")
        assert.are.equal(2, code)
        assert.is_truthy(err:find(msg, 1, true), err)
        local _, lines = err:gsub("ktgen: ", "")
        assert.are.equal(1, lines, err)
        assert.is_false(exists(dir .. "/out"))
      end
    end)
  end)

  -- Each case breaks one line of a copy of templates/ and names the line the
  -- error must point at ("broken", or a function of the file's lines).
  describe("broken inputs", function()
    local function line_after(lines, anchor, text)
      local from = 1
      if anchor then
        for i, l in ipairs(lines) do
          if l:find(anchor, 1, true) then from = i; break end
        end
      end
      for i = from, #lines do
        if lines[i]:find(text, 1, true) then return i end
      end
      error("'" .. text .. "' not found")
    end

    local cases = {
      { what = "a Lua syntax error in a space file",
        file = "matmul.space.lua", find = 'algo = "tiled",', from = "algo = ", to = "algo = = ",
        msg = "unexpected symbol" },
      { what = "a runtime error in a constraint function",
        file = "hist.space.lua", find = '"rep copies need at least rep warps"',
        from = "v.threads // 32", to = "v.no_such_field.threads // 32", msg = "no_such_field" },
      { what = "a Lua syntax error on an '@' line of a template",
        file = "matmul_wt.cu.tpl", find = '@ if vec == 4 then', from = "==", to = "== =",
        msg = "unexpected symbol" },
      { what = "an undefined variable in a template $(...) expression",
        file = "hist_smem.cu.tpl", find = "constexpr int THREADS = $(threads);", from = "$(threads)",
        to = "$(no_such_value)", msg = "'no_such_value' is not defined" },
      { what = "a parameter tag that generator/tags.lua does not list",
        file = "hist.space.lua", find = '{ "rep", { 1, 2 }', from = 'tag = "r"', to = 'tag = "zq"',
        msg = "tag 'zq' is not in generator/tags.lua" },
      { what = "a parameter tag that means another parameter",
        file = "hist.space.lua", find = '{ "rep", { 1, 2 }', from = 'tag = "r"', to = 'tag = "t"',
        msg = "tag 't' means threads per block" },
      { what = "a constraint whose needs names no parameter of its kernel",
        file = "matmul.space.lua", find = 'needs = { "split", "cluster" }', from = '"split"', to = '"splits"',
        msg = "a constraint's needs lists parameters of the kernel" },
      { what = "a derive() that forgets a required field",
        file = "matmul.space.lua", anchor = 'algo = "tiled"', find = "v.min_cc",
        from = "v.cluster, v.min_cc, v.align = 1, 0, 1", to = "v.cluster, v.align = 1, 1",
        msg = "derive() must set min_cc",
        line = function(lines) return line_after(lines, 'algo = "tiled"', "derive = function") end },
    }

    for _, case in ipairs(cases) do
      it(case.what .. " is reported as file:line: error:, exits non-zero and writes nothing", function()
        local dir = mkdtemp()
        finally(function() rm_tree(dir) end)
        local tdir = dir .. "/templates"
        assert(os.execute("cp -r templates '" .. tdir .. "'"))
        local path = tdir .. "/" .. case.file
        local lines = lines_of(read(path))
        local broken = line_after(lines, case.anchor, case.find)
        lines[broken] = replace_plain(lines[broken], case.from, case.to)
        write(path, table.concat(lines, "\n") .. "\n")
        local line = case.line and case.line(lines) or broken

        -- Into a directory that does not exist yet: it must stay absent.
        local out = dir .. "/out"
        local code, _, err = ktgen("--arch sm_90 --templates " .. tdir .. " --out " .. out)
        assert.are_not.equal(0, code)
        assert.is_false(exists(out), "the output directory was created")
        local located = "\n" .. err
        local head = ("\n%s:%d: error: "):format(path, line)
        local at = located:find(head, 1, true)
        assert.is_truthy(at, "expected '" .. head:sub(2) .. "...' in:\n" .. err)
        local reported = located:match("^[^\n]*\n([^\n]*)\n", at + 1) -- msg line, then the source line
        assert.is_truthy(located:find(escape_pattern(head) .. "[^\n]*" .. escape_pattern(case.msg)), err)
        assert.are.equal("    " .. lines[line], reported)
        for l in err:gmatch("[^\n]+") do
          if l:find(": error: ", 1, true) then
            assert.is_truthy(l:match("^[^:]+:%d+: error: %S"), "not file:line: error: msg: " .. l)
          end
        end
        assert.is_truthy(err:find("nothing written", 1, true), err)

        -- Into a directory that holds an earlier tree: not a byte changes.
        local existing = dir .. "/existing"
        ktgen_ok("--arch sm_90 --out " .. existing .. " --quiet")
        local before = tree(existing)
        code = ktgen("--arch sm_90 --templates " .. tdir .. " --out " .. existing)
        assert.are_not.equal(0, code)
        assert.are.same({}, tree_diff(before, tree(existing)))
      end)
    end
  end)
end)

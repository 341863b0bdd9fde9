-- SPDX-License-Identifier: MIT
-- generator/ktgen.lua: expand every kernel family over its parameter space.
--
--   lua5.4 generator/ktgen.lua --arch sm_80,sm_90 [--out generated] [--check] [--explain] [--quiet]
--                              [--no-prune] [--only GLOBS] [--templates DIR]
--
-- --arch names the targets (comma- or space-separated; generator/targets.lua
-- knows them).  Each family's space is enumerated for each target apart, so
-- a variant exists for the targets whose limits it meets (the cluster
-- histograms for sm_90 only).  A variant has one file, whatever the targets:
-- its name names its code, which must come out the same for every target
-- that keeps it (else an error), and the build compiles that file for each
-- of them into one fat object.  What may differ per target, the registry
-- facts derive() works out from the target's limits (blocks per SM, the
-- ranks of the defaults), goes into one registry entry per target and
-- variant, which carries the target; a GPU uses the entries of one target
-- (kt_device_target in runtime/device.c).
--
-- A variant's source hash, the key its measurements are kept under, is per
-- target: the FNV-1a of the text that a build for that target alone writes
-- for it, less the licence line and the ABI guard (neither is the kernel's
-- code; the guard changes with runtime/kt_variant.h, not with the kernel).
-- So adding a target to a build keeps the results measured for the others.
--
-- --no-prune keeps every configuration that can be built, including those
-- that the spaces' prune rules drop because measurements showed they cannot
-- win (on the GPU each rule names): the whole feasible space, for tuning a
-- new GPU.  A variant that pruning keeps has the same file either way; one
-- that only --no-prune keeps names --no-prune in its header's command.
--
-- --only keeps just the variants whose names match one of GLOBS (comma-
-- separated shell globs, * ? [...], each matching a whole name: see
-- generator/glob.lua; `ktune tune --variants` takes the same), plus every
-- family's defaults, which dispatch needs: a quick way to build and tune a
-- subset.
-- A variant's file is the same with or without --only (its header names
-- the command without it), so its hash, and what was tuned, stay valid.
--
-- Reads templates/<family>.space.lua and the template each of its kernels
-- names, drops every configuration that breaks a constraint or a prune rule,
-- and writes one .cu per kept
-- variant to <out>/<family>/<name>.cu, plus <out>/registry.{c,h} and
-- <out>/variants.mk.  All errors are collected first; nothing is written
-- unless the whole run is clean, and files whose content is unchanged are
-- left alone so that make rebuilds only what moved.
package.path = "./?.lua;" .. package.path

local diag = require("generator.diag")
local glob = require("generator.glob")
local space = require("generator.space")
local render = require("generator.render")
local targets = require("generator.targets")
local registry = require("generator.registry")
local tags = require("generator.tags")

local VERSION = registry.VERSION

local function usage(msg)
  io.stderr:write((msg and ("ktgen: " .. msg .. "\n") or "") ..
    "usage: lua5.4 generator/ktgen.lua --arch ARCH[,ARCH...] [--out DIR] [--templates DIR] [--explain] [--quiet] [--check]\n" ..
    "                                  [--no-prune] [--only GLOB,GLOB...]\n" ..
    "  each ARCH is one of: " .. table.concat(targets.names(), " ") .. "\n")
  os.exit(2)
end

local function parse_args(argv)
  local o = { out = "generated", templates = "templates", explain = false, quiet = false, check = false }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--arch" then o.arch = argv[i + 1]; i = i + 1
    elseif a == "--out" then o.out = argv[i + 1]; i = i + 1
    elseif a == "--templates" then o.templates = argv[i + 1]; i = i + 1
    elseif a == "--explain" then o.explain = true
    elseif a == "--quiet" then o.quiet = true
    elseif a == "--check" then o.check = true
    elseif a == "--no-prune" then o.no_prune = true
    elseif a == "--only" then
      o.only = argv[i + 1]; i = i + 1
      if not o.only or o.only:match("^%-%-") or not o.only:match("[^,%s]") then usage("--only needs globs") end
      local bad, err
      o.only_globs, bad, err = glob.list(o.only)
      if not o.only_globs then usage(("bad --only pattern '%s': %s"):format(bad, err)) end
    elseif a == "-h" or a == "--help" then usage()
    else usage("unknown argument '" .. tostring(a) .. "'") end
    i = i + 1
  end
  if not o.arch then usage("--arch is required") end
  local err
  o.targets, err = targets.parse(o.arch)
  if not o.targets then usage(err) end
  local names = {}
  for _, t in ipairs(o.targets) do names[#names + 1] = t.arch end
  o.arch = table.concat(names, ",") -- by compute capability, as headers and make name them
  if not o.out or not o.templates then usage("missing value") end
  return o
end

-- 64-bit FNV-1a of a string, as 16 hex digits (Lua 5.4 integers wrap).
-- Eight bytes per call of string.byte: the hash of every variant's text
-- is most of the generator's time.
local function fnv1a64(s)
  local h, p, n = -3750763034362895579, 1099511628211, #s -- 0xcbf29ce484222325, the FNV prime
  local byte = string.byte
  local i = 1
  while i + 7 <= n do
    local a, b, c, d, e, f, g, k = byte(s, i, i + 7)
    h = (h ~ a) * p; h = (h ~ b) * p; h = (h ~ c) * p; h = (h ~ d) * p
    h = (h ~ e) * p; h = (h ~ f) * p; h = (h ~ g) * p; h = (h ~ k) * p
    i = i + 8
  end
  for j = i, n do h = (h ~ byte(s, j)) * p end
  return ("%016x"):format(h)
end

-- The licence line (SPDX-License-Identifier) is no part of the code: it
-- enters no hash, so that writing or changing it keeps what was measured.
local SPDX = "/* SPDX-License-Identifier: MIT */\n"
local function without_spdx(text)
  return (text:gsub("^[^\n]*SPDX%-License%-Identifier:[^\n]*\n", "", 1))
end

local function shell_quote(s)
  if s:match("^[%w%._/%-=,]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The families: one templates/<family>.space.lua each, in name order.
local function family_names(dir)
  local names = {}
  local p = io.popen("ls " .. shell_quote(dir) .. " 2>/dev/null")
  for f in p:lines() do
    local fam = f:match("^([%w_]+)%.space%.lua$")
    if fam then names[#names + 1] = fam end
  end
  p:close()
  table.sort(names)
  return names
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Write atomically (temp file + rename), and only when the content moved.
local function write_if_changed(path, content)
  if read_file(path) == content then return false end
  local tmp = path .. ".tmp"
  local f = assert(io.open(tmp, "wb"))
  f:write(content)
  f:close()
  assert(os.rename(tmp, path))
  return true
end

-- The DO-NOT-EDIT block of a variant built for the targets of `built`, a
-- list of { t = target, v = the variant as that target's space derived it }.
-- For one target it is the block that a build for that target alone writes,
-- the text its source hash is taken from.  It lists the parameters that
-- are not silent (tags.silent) and the includes of the templates folder
-- that the variant's source, body, includes.
local function header(built, tpl, command, body)
  local v = built[1].v
  local names = {}
  for _, b in ipairs(built) do names[#names + 1] = b.t.arch end
  local lines = {
    "/* DO NOT EDIT: generated by ktgen " .. VERSION .. " from " .. tpl.path .. ".",
    " * Regenerate from the project root with:",
    " *     " .. command,
    " *",
    " * variant: " .. v.name,
    " * family:  " .. v.family .. " (" .. v.algo .. ")",
    " * target:  " .. table.concat(names, " "),
  }
  for _, inc in ipairs(tpl.includes) do
    if body:find(inc.pattern) then
      lines[#lines + 1] = " * includes: " .. inc.path .. " (FNV-1a 64 " .. inc.hash .. ")"
    end
  end
  lines[#lines + 1] = " * parameters:"
  local shown, width = {}, 0
  for _, p in ipairs(v.param_spec) do
    if not tags.silent(p, v) then
      shown[#shown + 1] = p
      width = math.max(width, #p[1])
    end
  end
  for _, p in ipairs(shown) do
    lines[#lines + 1] = (" *   %-" .. width .. "s = %-6s %s"):format(p[1], tostring(v[p[1]]), p[3])
  end
  -- What a launch needs, once if every target derived the same, else per target.
  local needs, seen = {}, {}
  for _, b in ipairs(built) do
    local x = b.v
    local text = ("%d threads, %d B static + %d B dynamic shared memory, cluster %d, %s"):format(
      x.threads, x.smem_static, x.smem_dynamic, x.cluster,
      x.min_cc > 0 and ("compute capability %d.%d+"):format(x.min_cc // 10, x.min_cc % 10) or "any GPU")
    if not seen[text] then seen[text] = true; needs[#needs + 1] = { arch = b.t.arch, text = text } end
  end
  for _, n in ipairs(needs) do
    lines[#lines + 1] = " * launch needs: " .. (#needs > 1 and (n.arch .. ": ") or "") .. n.text
  end
  lines[#lines + 1] = " */"
  return table.concat(lines, "\n") .. "\n"
end

-- Each kernel's template, compiled, with the headers it includes from the
-- templates folder (#include "name.cuh") and the hash of each: the hashes go
-- into the header, so that editing a shared include changes the source hash
-- of every variant that uses it, as editing its template does.
local function kernel_templates(s, opts, errs)
  local out = {}
  for _, k in ipairs(s.kernels) do
    -- The space names the template from the project root; like the space,
    -- it is read from the --templates folder.
    local path = opts.templates .. "/" .. k.template:match("[^/]*$")
    local src = read_file(path)
    if not src then
      errs:add(s.file, space.locate(s, k.template), ("template '%s' not found"):format(path))
    else
      local tpl = { path = path, compiled = render.compile(path, errs), includes = {} }
      local n, listed = 0, {}
      for line in (src .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        -- Every header named on an #include line, also inside a $(...)
        -- that picks one per variant, once: header() lists those that a
        -- variant's source does include.
        if line:match("^%s*#%s*include%s") then
          for name in line:gmatch("([%w_]+%.cuh)") do
            if not listed[name] then
              local text = read_file(opts.templates .. "/" .. name)
              if text then
                listed[name] = true
                tpl.includes[#tpl.includes + 1] = { path = opts.templates .. "/" .. name,
                  hash = fnv1a64(without_spdx(text)),
                  pattern = '#%s*include%s+"' .. name:gsub("%p", "%%%0") .. '"' } -- header() finds it in a body
              else
                errs:add(path, n, ("'%s' is not in %s/"):format(name, opts.templates))
              end
            end
          end
        end
      end
      out[k.algo] = tpl
    end
  end
  return out
end

-- --only: move the kept variants that match no glob (and are no default)
-- to the dropped list, with the reason.  Returns the kept list and how many
-- variants the globs themselves matched.
local function select_only(s, kept, dropped, globs)
  local is_default = {}
  for _, name in ipairs(s.defaults or {}) do is_default[name] = true end
  local out, matched = {}, 0
  for _, v in ipairs(kept) do
    local hit = glob.any(globs, v.name)
    if hit then matched = matched + 1 end
    if hit or is_default[v.name] then out[#out + 1] = v
    else dropped[#dropped + 1] = { v = v, kind = "only", reasons = { "not selected by --only" } } end
  end
  return out, matched
end

-- What was kept and dropped, and why: constraints (cannot be built),
-- pruning (cannot win) and --only, each counted apart.  With --explain one
-- line per configuration, else one line per reason with how many it dropped.
local WORD = { constraint = "dropped", prune = "pruned", only = "skipped" }
local function report(f, t, opts)
  local n = { constraint = 0, prune = 0, only = 0 }
  for _, d in ipairs(f.dropped) do n[d.kind] = n[d.kind] + 1 end
  local would = 0
  for _, v in ipairs(f.kept) do
    if v.pruned then would = would + 1 end
  end
  io.write(("%s: %d variants kept, %d dropped (target %s): %d by constraints, %s%s\n"):format(
    f.space.family, #f.kept, #f.dropped, t.arch, n.constraint,
    opts.no_prune and ("none by pruning (--no-prune; it would drop %d)"):format(would)
      or ("%d by pruning"):format(n.prune),
    opts.only and (", %d not selected by --only"):format(n.only) or ""))
  if opts.explain then
    for _, v in ipairs(f.kept) do
      io.write("  kept    " .. v.name ..
        (v.pruned and (" (pruning would drop it: " .. table.concat(v.pruned, "; ") .. ")") or "") .. "\n")
    end
    for _, d in ipairs(f.dropped) do
      io.write(("  %-7s %s: %s\n"):format(WORD[d.kind], d.v.name, table.concat(d.reasons, "; ")))
    end
    return
  end
  for _, kind in ipairs({ "constraint", "prune", "only" }) do
    local count, order = {}, {}
    for _, d in ipairs(f.dropped) do
      if d.kind == kind then
        for _, r in ipairs(d.reasons) do
          if not count[r] then count[r] = 0; order[#order + 1] = r end
          count[r] = count[r] + 1
        end
      end
    end
    for _, r in ipairs(order) do io.write(("  %5d %s: %s\n"):format(count[r], WORD[kind], r)) end
  end
end

local function main(argv)
  local opts = parse_args(argv)
  local errs = diag.new()
  local base = " --out " .. shell_quote(opts.out) ..
    (opts.templates ~= "templates" and (" --templates " .. shell_quote(opts.templates)) or "")
  local function command_for(arch) return "lua5.4 generator/ktgen.lua --arch " .. shell_quote(arch) .. base end
  local command = command_for(opts.arch)
  -- Variant headers name the command without --only, and with --no-prune
  -- only when pruning would drop the variant (see the top).
  local reg_command = command .. (opts.no_prune and " --no-prune" or "") ..
    (opts.only and (" --only " .. shell_quote(opts.only)) or "")

  -- Per family: per target, what its space keeps (kept, dropped, defaults),
  -- and over all targets, one file per variant name.
  local families, only_matched = {}, 0
  for _, fam in ipairs(family_names(opts.templates)) do
    local path = opts.templates .. "/" .. fam .. ".space.lua"
    local s = space.load(path, errs)
    local tpls = s and kernel_templates(s, opts, errs)
    local compiled = s ~= nil
    for _, k in ipairs(s and s.kernels or {}) do compiled = compiled and tpls[k.algo] and tpls[k.algo].compiled end
    local f = compiled and { space = s, per_target = {}, files = {}, includes = {} }
    local built, order = {}, {} -- name -> list of { t, v, body }; names in first-met order
    for _, t in ipairs(f and opts.targets or {}) do
      local st = s
      local kept, dropped = space.enumerate(st, t, errs,
        { no_prune = opts.no_prune, names = opts.explain, lean = opts.quiet and not opts.explain })
      if kept and opts.only then
        local matched
        kept, matched = select_only(st, kept, dropped, opts.only_globs)
        only_matched = only_matched + matched
      end
      if kept then
        for _, k in ipairs(st.kernels) do
          for _, v in ipairs(kept) do
            if v.algo == k.algo then v.param_spec = k.params end
          end
        end
        for _, v in ipairs(kept) do
          local tpl = tpls[v.algo]
          local env = setmetatable({ target = t, name = v.name }, { __index = v })
          local body = render.expand(tpl.compiled, env, errs)
          if body then
            -- The text a build for t alone writes, less the licence line
            -- and the ABI guard (see the top).
            local one = { { t = t, v = v } }
            local command_t = command_for(t.arch) .. (v.pruned and " --no-prune" or "")
            v.source_hash = fnv1a64(header(one, tpl, command_t, body) .. body)
            if not built[v.name] then built[v.name] = {}; order[#order + 1] = v.name end
            table.insert(built[v.name], { t = t, v = v, body = body })
          end
        end
        f.per_target[#f.per_target + 1] = { t = t, kept = kept, dropped = dropped,
          defaults = registry.rank_defaults(st, kept, dropped, errs) }
      end
    end
    for _, name in ipairs(order) do
      local b = built[name]
      local tpl = tpls[b[1].v.algo]
      for i = 2, #b do
        if b[i].body ~= b[1].body then
          errs:add(tpl.path, 1, ("variant %s comes out differently for %s and %s: a name must name one code, " ..
            "so what the template does with the target must be a parameter (with a tag)"):format(
            name, b[1].t.arch, b[i].t.arch))
        end
      end
      local pruned = false
      for _, x in ipairs(b) do pruned = pruned or x.v.pruned ~= nil end
      f.files[#f.files + 1] = { path = opts.out .. "/" .. fam .. "/" .. name .. ".cu",
        text = SPDX .. header(b, tpl, command .. (pruned and " --no-prune" or ""), b[1].body) .. registry.abi_guard() ..
          b[1].body }
    end
    if f then
      local seen = {}
      for _, k in ipairs(s.kernels) do
        for _, inc in ipairs(tpls[k.algo].includes) do
          if not seen[inc.path] then seen[inc.path] = true; f.includes[#f.includes + 1] = inc.path end
        end
      end
      families[#families + 1] = f
    end
  end

  if opts.only and only_matched == 0 and errs:empty() then
    io.stderr:write("ktgen: warning: --only matched no variant; only the defaults are kept\n")
  elseif opts.only and errs:empty() then
    for _, g in ipairs(opts.only_globs) do
      if not g.hits then io.stderr:write(("ktgen: warning: --only '%s' matched no variant\n"):format(g.glob)) end
    end
  end
  if not errs:empty() then
    errs:report(io.stderr)
    io.stderr:write(("ktgen: %d error(s); nothing written\n"):format(#errs.list))
    return 1
  end

  if not opts.quiet then
    for _, f in ipairs(families) do
      for _, pt in ipairs(f.per_target) do report({ space = f.space, kept = pt.kept, dropped = pt.dropped }, pt.t, opts) end
    end
  end
  if opts.check then return 0 end

  local changed = 0
  os.execute("mkdir -p " .. shell_quote(opts.out))
  local wanted = {}
  for _, f in ipairs(families) do
    local dir = opts.out .. "/" .. f.space.family
    os.execute("mkdir -p " .. shell_quote(dir))
    for _, file in ipairs(f.files) do
      wanted[file.path] = true
      if write_if_changed(file.path, file.text) then changed = changed + 1 end
    end
    -- Remove variants that the space no longer produces.
    local p = io.popen("ls " .. shell_quote(dir) .. " 2>/dev/null")
    for name in p:lines() do
      local path = dir .. "/" .. name
      if name:match("%.cu$") and not wanted[path] then os.remove(path) end
    end
    p:close()
  end
  local reg = registry.emit(families, opts, reg_command)
  for name, text in pairs(reg) do
    if write_if_changed(opts.out .. "/" .. name, text) then changed = changed + 1 end
  end
  if not opts.quiet then
    io.write(("ktgen: %s/ up to date (%d file(s) rewritten)\n"):format(opts.out, changed))
  end
  return 0
end

os.exit(main(arg))

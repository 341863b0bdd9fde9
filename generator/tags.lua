-- SPDX-License-Identifier: MIT
-- generator/tags.lua: the tags that variant names are built from.
--
-- A variant's name is <family>_<algo>, then one token per parameter in the
-- order its kernel lists them: the parameter's tag and its value (t512,
-- b16).  A parameter that declares join = "x" adds "x" and its value to the
-- token before it instead, so a block tile reads 64x128x16.  The name is the
-- file, the kernel symbol, the registry entry and the database key, so a tag
-- must read the same in every family: each tag belongs to one parameter
-- name, and so one meaning, and the generator refuses a space that gives a
-- tag to another parameter or uses a tag that is not listed here.  Adding a
-- parameter means adding its tag here (or reusing the tag of the parameter
-- of the same name).
local tags = {}

-- tag -> { parameter it belongs to, what it means }.
tags.list = {
  t = { "threads", "threads per block" },
  c = { "cluster", "blocks per thread-block cluster; 1 = no cluster" },
  bs = { "bs", "edge of a square block tile, one output per thread (the Guide's BLOCK_SIZE)" },
  pad = { "pad", "floats of padding at the end of each shared-memory row" },
  tt = { "tt", "thread tile: rows x columns of C per thread" },
  w = { "wtm", "lanes of a warp along M" },
  s = { "stages", "pipeline stages: K slices in shared memory" },
  v = { "vec", "floats per vector copy" },
  g = { "group", "tile rows per band of the launch order" },
  o = { "occ", "occupancy hint, blocks per SM; 0 = none" },
  k = { "split", "most chunks K is split into through a workspace; 1 = none" },
  p = { "persist", "persistent grid: OCC blocks per SM loop over the tiles; 0 = a block per tile" },
  r = { "rep", "copies of the bins per block" },
  a = { "agg", "warp aggregation of equal bins: 1 on, 0 off" },
  b = { "cw", "bits per shared-memory counter" },
  u = { "ipt", "int4 loads in flight per thread and loop step (unroll)" },
  wg = { "wg", "consumer warpgroups per block (warp-specialised kernels)" },
  wp = { "warps", "warps per block, along M x along N" },
  m = { "merge", "runs of equal bins add once: 1 on, 0 off" },
  l = { "l2fit", "passes over ranges of bins that fit the L2: 1 on, 0 off" },
  q = { "kwarps", "warps of a block that split K (the rest split rows)" },
  d = { "depth", "k per lane whose loads are in flight at once" },
  e = { "epi", "C's stores: 1 = whole rows through shared memory where C's rows are not 16-byte aligned; 0 = as before" },
  ls = { "stream", "the operand read once is loaded past L1 (L1::no_allocate, L2::256B): 1 on, 0 off" },
}

-- Parameters whose values read on their own, written without a tag.
tags.bare = {
  bm = "the block tile, BM x BN x BK (bn and bk join it with x)",
  layout = "a layout, by its name (blocked, cyclic)",
  type = "the input type, by its name (bf16, f16, tf32)",
}

-- Why parameter p (one entry of a kernel's params) cannot be named, or nil.
-- `previous` is the parameter before it in the same kernel, if any.
function tags.check(p, previous)
  local name, tag, join = p[1], p.tag, p.join
  if p.legacy ~= nil then
    local listed = false
    for _, value in ipairs(p[2]) do listed = listed or tostring(value) == tostring(p.legacy) end
    if not listed then return ("parameter '%s': its legacy value is not one of its values"):format(name) end
    if join ~= nil or tag == "" then
      return ("parameter '%s' has a legacy value, so it needs a tag of its own"):format(name)
    end
  end
  if join ~= nil then
    if join ~= "x" then return ("parameter '%s': join must be \"x\""):format(name) end
    if tag ~= nil then return ("parameter '%s' joins the one before it, so it has no tag"):format(name) end
    if not previous then return ("parameter '%s' joins the one before it, but it is the first"):format(name) end
    return nil
  end
  if tag == nil then return ("parameter '%s' has no tag (tag = \"...\", see generator/tags.lua)"):format(name) end
  if tag == "" then
    if tags.bare[name] then return nil end
    return ("parameter '%s' has no tag, which only %s may have (generator/tags.lua)"):format(
      name, table.concat(tags.sorted(tags.bare), ", "))
  end
  local entry = tags.list[tag]
  if not entry then
    return ("parameter '%s': tag '%s' is not in generator/tags.lua"):format(name, tostring(tag))
  end
  if entry[1] ~= name then
    return ("parameter '%s': tag '%s' means %s (parameter '%s'), in every family"):format(
      name, tag, entry[2], entry[1])
  end
  return nil
end

-- A parameter added to a kernel after its variants were tuned may name
-- the value that leaves the kernel as it was (legacy = value).  At that
-- value the parameter is silent: no token in the variant's name, no line
-- in its file's header; and where the template renders there the code it
-- rendered before (the value picked inside a line, `$(...)`: an `@ if`
-- line would renumber the #line directives after it), those variants keep
-- their names, files and source hashes, and what was measured for them
-- stays valid.  The other values are new variants.
function tags.silent(p, v)
  return p.legacy ~= nil and tostring(v[p[1]]) == tostring(p.legacy)
end

-- The keys of t, sorted.
function tags.sorted(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- The name of configuration v of kernel k in family `family`.
function tags.name(family, k, v)
  local parts = { family, k.algo }
  for _, p in ipairs(k.params) do
    local value = tostring(v[p[1]])
    if tags.silent(p, v) then
      -- the kernel as it was before the parameter: the name it had then
    elseif p.join then
      parts[#parts] = parts[#parts] .. p.join .. value
    else
      parts[#parts + 1] = p.tag .. value
    end
  end
  return table.concat(parts, "_")
end

return tags

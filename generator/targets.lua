-- SPDX-License-Identifier: MIT
-- generator/targets.lua: what each CUDA target allows.
--
-- The targets are an input to the generator (ARCHS="sm_80 sm_90", ktgen
-- --arch sm_80,sm_90): each one decides the limits that its spaces are
-- enumerated under, and so which variants exist for it at all.  Figures are
-- from the CUDA C Programming Guide's table of compute capabilities.
local targets = {}

local KB = 1024

local function target(arch, cc, t)
  t.arch = arch
  t.cc = cc                          -- compute capability x 10 (90 = 9.0)
  t.max_threads = 1024               -- threads per block
  t.regs_per_sm = 64 * KB            -- 32-bit registers per multiprocessor
  t.max_regs_per_thread = 255
  t.clusters = cc >= 90              -- thread-block clusters and DSM
  t.max_cluster_portable = t.clusters and 8 or 1
  t.max_cluster = t.clusters and 16 or 1   -- 16 needs the non-portable opt-in
  -- Which GPUs run its code: every one of compute capability cc or newer
  -- (its SASS those of the same major version, its PTX, which every build
  -- embeds, the newer ones), or, for an arch-specific target (sm_90a), only
  -- GPUs of exactly cc.
  t.exact = t.exact or false
  targets[arch] = t
end

-- smem_optin: the most shared memory one block may have after opting in
-- with cudaFuncAttributeMaxDynamicSharedMemorySize (per-SM minus 1 KB).
target("sm_80", 80, { smem_optin = 163 * KB, smem_per_sm = 164 * KB, max_threads_per_sm = 2048 })
target("sm_86", 86, { smem_optin = 99 * KB,  smem_per_sm = 100 * KB, max_threads_per_sm = 1536 })
target("sm_89", 89, { smem_optin = 99 * KB,  smem_per_sm = 100 * KB, max_threads_per_sm = 1536 })
target("sm_90", 90, { smem_optin = 227 * KB, smem_per_sm = 228 * KB, max_threads_per_sm = 2048 })
target("sm_90a", 90, { smem_optin = 227 * KB, smem_per_sm = 228 * KB, max_threads_per_sm = 2048, exact = true })

function targets.get(arch)
  return targets[arch]
end

function targets.names()
  local names = {}
  for k, v in pairs(targets) do
    if type(v) == "table" then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

-- A list of targets, as ARCHS or --arch give it (names separated by spaces
-- or commas): the targets, by compute capability, or nil and the one
-- message that says what is wrong with it.  A build has one target per
-- compute capability, the one the runtime matches a GPU against
-- (runtime/device.c, kt_device_target).
function targets.parse(list)
  local out, by_cc = {}, {}
  for name in tostring(list or ""):gmatch("[^%s,]+") do
    local t = targets[name]
    if type(t) ~= "table" then
      return nil, ("'%s' is not a target ktune can generate kernels for; the targets are: %s"):format(
        name, table.concat(targets.names(), " "))
    end
    if by_cc[t.cc] and by_cc[t.cc] ~= name then
      return nil, ("%s and %s are both compute capability %d.%d: give one of them"):format(
        by_cc[t.cc], name, t.cc // 10, t.cc % 10)
    end
    if not by_cc[t.cc] then out[#out + 1] = t end
    by_cc[t.cc] = name
  end
  if #out == 0 then return nil, "no target given; the targets are: " .. table.concat(targets.names(), " ") end
  table.sort(out, function(a, b) return a.cc < b.cc end)
  return out
end

return targets

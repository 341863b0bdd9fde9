-- SPDX-License-Identifier: MIT
-- generator/targets.lua: what each CUDA target allows.
--
-- The architecture is an input to the generator (ARCH=sm_90 ...): it decides
-- the limits that prune each space and which variants exist at all.  Figures
-- are from the CUDA C Programming Guide's table of compute capabilities.
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
  targets[arch] = t
end

-- smem_optin: the most shared memory one block may have after opting in
-- with cudaFuncAttributeMaxDynamicSharedMemorySize (per-SM minus 1 KB).
target("sm_80", 80, { smem_optin = 163 * KB, smem_per_sm = 164 * KB, max_threads_per_sm = 2048 })
target("sm_86", 86, { smem_optin = 99 * KB,  smem_per_sm = 100 * KB, max_threads_per_sm = 1536 })
target("sm_89", 89, { smem_optin = 99 * KB,  smem_per_sm = 100 * KB, max_threads_per_sm = 1536 })
target("sm_90", 90, { smem_optin = 227 * KB, smem_per_sm = 228 * KB, max_threads_per_sm = 2048 })
target("sm_90a", 90, { smem_optin = 227 * KB, smem_per_sm = 228 * KB, max_threads_per_sm = 2048 })

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

return targets

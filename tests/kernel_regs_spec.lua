-- SPDX-License-Identifier: MIT
-- tests/kernel_regs_spec.lua: reading nvcc's resource reports into the
-- table libktune links (generator/kernel_regs.lua).
--
--   busted --lpath='./?.lua' --pattern=_spec tests/      (from the project root)
local kernel_regs = require("generator.kernel_regs")

-- A report as `nvcc -Xptxas -v` writes it for a fat build: a helper kernel
-- first, then the variant's own, for sm_80 and sm_90.
local REPORT = [[
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul_x_k4_reduce' for 'sm_80'
ptxas info    : Function properties for matmul_x_k4_reduce
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 22 registers, used 0 barriers
ptxas info    : Compiling entry function 'matmul_x_k4' for 'sm_80'
ptxas info    : Function properties for matmul_x_k4
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 64 registers, used 1 barriers, 10496 bytes smem
ptxas info    : Compile time = 12.000 ms
ptxas info    : Compiling entry function 'matmul_x_k4' for 'sm_90'
ptxas info    : Function properties for matmul_x_k4
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 60 registers, used 1 barriers
ptxas info    : Compiling entry function 'matmul_x_k4_reduce' for 'sm_90'
ptxas info    : Used 29 registers, used 1 barriers, 1024 bytes smem
]]

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end

describe("kernel_regs", function()
  it("names a report's variant after its file", function()
    assert.are.equal("matmul_x_k4", kernel_regs.variant_of("build/obj/matmul/matmul_x_k4.ptxas"))
    assert.is_nil(kernel_regs.variant_of("build/obj/matmul/matmul_x_k4.o"))
  end)

  it("reads the variant's own entry per target, not its helpers'", function()
    local found = kernel_regs.parse(REPORT, "matmul_x_k4")
    assert.are.same({ { target = 80, regs = 64, smem = 10496 }, { target = 90, regs = 60, smem = 0 } }, found)
    local helper = kernel_regs.parse(REPORT, "matmul_x_k4_reduce")
    assert.are.same({ { target = 80, regs = 22, smem = 0 }, { target = 90, regs = 29, smem = 1024 } }, helper)
  end)

  it("counts an sm_90a report as target 90", function()
    local text = REPORT:gsub("'sm_90'", "'sm_90a'")
    assert.are.same({ target = 90, regs = 60, smem = 0 }, kernel_regs.parse(text, "matmul_x_k4")[2])
  end)

  it("finds nothing for a kernel the report does not name", function()
    assert.are.same({}, kernel_regs.parse(REPORT, "matmul_x"))
    assert.are.same({}, kernel_regs.parse("", "matmul_x_k4"))
  end)

  it("writes the entries sorted by name, then target, and their count", function()
    local c = kernel_regs.c_table({
      { name = "matmul_b", target = 90, regs = 40, smem = 0 },
      { name = "matmul_a", target = 90, regs = 32, smem = 512 },
      { name = "matmul_a", target = 80, regs = 30, smem = 512 },
    })
    local a80 = c:find('{ "matmul_a", 80, 30, 512 }', 1, true)
    local a90 = c:find('{ "matmul_a", 90, 32, 512 }', 1, true)
    local b90 = c:find('{ "matmul_b", 90, 40, 0 }', 1, true)
    assert.is_truthy(a80 and a90 and b90)
    assert.is_true(a80 < a90 and a90 < b90)
    assert.is_truthy(c:find("const int kt_kernel_regs_count = 3;", 1, true))
  end)

  it("keeps the array non-empty where no report was read", function()
    local c = kernel_regs.c_table({})
    assert.is_truthy(c:find("{ 0, 0, 0, 0 }", 1, true))
    assert.is_truthy(c:find("const int kt_kernel_regs_count = 0;", 1, true))
  end)

  it("reads files, skips reports without the variant's entry, fails on a missing one", function()
    local d = tmpdir()
    local f = assert(io.open(d .. "/matmul_x_k4.ptxas", "w"))
    f:write(REPORT)
    f:close()
    f = assert(io.open(d .. "/gemm_t.ptxas", "w"))
    f:write("ptxas info    : Compiling entry function '_Z6gemm_tILi0EEvv' for 'sm_90a'\n" ..
      "ptxas info    : Used 168 registers, used 1 barriers\n")
    f:close()
    local entries, errs = kernel_regs.from_files({ d .. "/matmul_x_k4.ptxas", d .. "/gemm_t.ptxas" })
    assert.are.same({}, errs)
    assert.are.equal(2, #entries)
    assert.are.equal("matmul_x_k4", entries[1].name)
    entries, errs = kernel_regs.from_files({ d .. "/none.ptxas" })
    assert.are.equal(0, #entries)
    assert.are.equal(1, #errs)
    assert.is_truthy(errs[1]:find("none.ptxas: error:", 1, true))
    os.execute("rm -rf '" .. d .. "'")
  end)
end)

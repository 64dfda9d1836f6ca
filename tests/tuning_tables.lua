-- The shipped tuning tables hold together (ctest test_tuning_tables): every
-- key a table's fp16_too names is a problem-2 shape with a TF32 entry
-- (precision=0) in the same table for fp16 to take, and no table names a
-- precision=2 entry of its own for such a shape (the entry would win over
-- fp16_too unseen). Exits 1 with each fault named.
local faults = 0
for _, name in ipairs { "tuning_h200", "tuning_h100" } do
  local t = require(name)
  for short in pairs(t.fp16_too or {}) do
    local tf32 = "edit_attention_bwd " .. short .. " precision=0"
    if type(t.entries[tf32]) ~= "string" then
      print(name .. ": fp16_too names '" .. short .. "', which has no TF32 entry")
      faults = faults + 1
    end
    if t.entries["edit_attention_bwd " .. short .. " precision=2"] then
      print(name .. ": fp16_too names '" .. short .. "', which has a precision=2 entry too")
      faults = faults + 1
    end
  end
end
print(faults == 0 and "the tables hold together" or faults .. " faults")
os.exit(faults == 0 and 0 or 1)

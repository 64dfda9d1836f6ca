-- The kernels' parameter lists, read from the rendered templates, and the
-- check of a launch's arguments against them. A kernel's signature is
-- written once, in its template (next to the body that uses the names, and
-- where tests/CMakeLists.txt's CPU emulations render it without Lua); a plan
-- only spells each launch's arguments (lua/edit_attention_builder.lua), and
-- a wrong count or kind is a Lua error naming the launch and the argument,
-- before NVRTC or the driver could take it.
--
-- The reader follows the preprocessor as far as parameter lists need it:
-- comments, line continuations, #if/#ifdef/#ifndef/#elif/#else/#endif on
-- plain numbers, ==, != and defined names (rendered holes make them such),
-- and object-like #define/#undef (the attention pass on wgmma spells its
-- list as FW_PASS_PARAMS). Code under any other condition is left out; a
-- kernel declared there is not found, which is an error, never a wrong list.
local M = {}

-- A macro defined under a condition the reader cannot tell.
local UNKNOWN = {}

-- Comments out, line continuations joined (block comments keep their line
-- breaks): applied to a directive's line or a parameter list only, since
-- Lua's patterns are slow over a whole source of 150 KB.
local function uncommented(text)
  text = text:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", "")) end)
  text = text:gsub("//[^\n]*", "")
  return (text:gsub("\\\n", " "))
end

-- A condition's value: true, false, or nil where the reader cannot tell.
local function condition(expr, macros)
  expr = expr:match("^%s*(.-)%s*$")
  local n = tonumber(expr)
  if math.type(n) == "integer" then return n ~= 0 end
  local a, op, b = expr:match("^(%-?%d+)%s*([=!]=)%s*(%-?%d+)$")
  if a then return (tonumber(a) == tonumber(b)) == (op == "==") end
  local name = expr:match("^defined%s*%(?%s*([%a_][%w_]*)%s*%)?$")
  if name then
    if macros[name] == UNKNOWN then return nil end
    return macros[name] ~= nil
  end
  return nil
end

-- Where the parent is active (true), a branch is its condition; under an
-- inactive parent it is inactive; under an unknown one, unknown or inactive.
local function branch(parent, cond)
  if parent == false or cond == false then return false end
  if parent == nil or cond == nil then return nil end
  return true
end

-- One directive: the stack of conditions and the macros change.
local function directive(r, word, rest)
  local stack, macros = r.stack, r.macros
  local top = stack[#stack]
  if word == "if" or word == "ifdef" or word == "ifndef" then
    local cond
    if word == "if" then cond = condition(rest, macros)
    else
      cond = condition("defined " .. rest, macros)
      if word == "ifndef" and cond ~= nil then cond = not cond end
    end
    stack[#stack + 1] = { parent = r.active, taken = cond }
    r.active = branch(r.active, cond)
  elseif (word == "elif" or word == "else") and top then
    local cond
    if top.taken == true then cond = false
    elseif top.taken == nil then cond = nil
    else cond = word == "else" or condition(rest, macros) end
    if top.taken == false then top.taken = cond end
    r.active = branch(top.parent, cond)
  elseif word == "endif" and top then
    r.active = top.parent
    stack[#stack] = nil
  elseif (word == "define" or word == "undef") and r.active ~= false then
    local name, params = rest:match("^%s*([%a_][%w_]*)(%(?)")
    if not name then return end
    if r.macros_shared then -- a kernel read before keeps the macros it saw
      local copy = {}
      for k, v in pairs(macros) do copy[k] = v end
      macros, r.macros, r.macros_shared = copy, copy, false
    end
    if r.active == nil then macros[name] = UNKNOWN
    elseif word == "undef" then macros[name] = nil
    elseif params == "(" then macros[name] = UNKNOWN -- function-like: not expanded
    else macros[name] = rest:match("^%s*[%a_][%w_]*(.*%S)") or "" end -- not (.-)%s*$: quadratic in blanks
  end
end

-- Object-like macros expanded; nil and the name where one is not known.
local function expanded(text, macros)
  local any = false
  for name in pairs(macros) do
    if text:find(name, 1, true) then
      any = true
      break
    end
  end
  if not any then return text end
  for _ = 1, 16 do
    local unknown, changed
    text = text:gsub("[%a_][%w_]*", function(id)
      local m = macros[id]
      if m == UNKNOWN then unknown = id
      elseif m then
        changed = true
        return " " .. m .. " "
      end
    end)
    if unknown then return nil, unknown end
    if not changed then return text end
  end
  return nil, "(macros nested past 16)"
end

-- The parameters of a list, split at its top-level commas (a bracketed
-- part, such as a template's arguments, is skipped whole).
local BRACKETS = { ["("] = "^%b()()", ["<"] = "^%b<>()", ["["] = "^%b[]()" }
local function split_params(list)
  local params, start, pos = {}, 1, 1
  while true do
    local at, c = list:match("()([,(<%[])", pos)
    if not at then break end
    if c == "," then
      params[#params + 1] = list:sub(start, at - 1)
      start = at + 1
      pos = at + 1
    else
      pos = list:match(BRACKETS[c], at) or at + 1
    end
  end
  params[#params + 1] = list:sub(start)
  local out = {}
  for _, p in ipairs(params) do
    p = p:gsub("%s+", " "):match("^ ?(.-) ?$")
    if p ~= "" and p ~= "void" then out[#out + 1] = p end
  end
  return out
end

local QUALIFIERS = { const = true, volatile = true, __restrict__ = true, __grid_constant__ = true }
local SCALARS = { float = "f32", int = "i32", ["long long"] = "i64", ["long long int"] = "i64" }

-- A parameter's slot: { decl, name, kind = "pointer" | "f32" | "i32" | "i64"
-- | "tmap", const (a pointer to const) }, or nil where no argument binds it.
local function slot(decl)
  local name = decl:match("([%a_][%w_]*)$")
  if not name or decl:find("[&%[]") then return nil end
  local star = decl:find("*", 1, true)
  if star then
    local pointee = decl:sub(1, star - 1)
    return { decl = decl, name = name, kind = "pointer", const = pointee:find("%f[%w_]const%f[^%w_]") ~= nil }
  end
  local words = {}
  for w in decl:gmatch("[%a_][%w_:]*") do
    if not QUALIFIERS[w] then words[#words + 1] = w end
  end
  words[#words] = nil -- the name
  local type = table.concat(words, " ")
  local kind = SCALARS[type] or (type:match("^[%w_:]*tma_map$") and "tmap")
  return kind and { decl = decl, name = name, kind = kind } or nil
end

-- The name and parameter list (nil where a directive stands inside it) of
-- the kernel declared at `at`: void, then __launch_bounds__(...) and
-- __cluster_dims__(...), then the name.
local function declaration(text, at)
  local pos = at
  while true do
    local id, after = text:match("^%s*([%a_][%w_]*)()", pos)
    if not id then return nil end
    pos = after
    if id ~= "void" then
      local args, past = text:match("^%s*(%b())()", pos)
      if id:sub(1, 2) ~= "__" then
        if not args or args:find("\n[ \t]*#") then return id, nil end
        return id, args:sub(2, -2)
      end
      if not args then return nil end
      pos = past
    end
  end
end

-- Whether position at of text is the first of its line but blanks.
local function starts_line(text, at)
  local i = at - 1
  while i >= 1 do
    local c = text:byte(i)
    if c == 10 then return true end
    if c ~= 32 and c ~= 9 then return false end
    i = i - 1
  end
  return true
end

-- The directives and kernel declarations of a text, in order. A directive
-- starts a line and runs to the first line end without a backslash before
-- it; a declaration is extern "C" __global__ at the start of a line.
-- Plain finds locate both (a directive inside a block comment would be
-- read as one; the templates have none).
local function items(text)
  local out, at = {}, 1
  while true do
    at = text:find("#", at, true)
    if not at then break end
    if text:match("^#%s*pragma", at) then
      at = at + 1
    elseif starts_line(text, at) then
      local stop = at
      repeat stop = text:find("\n", stop + 1, true) or #text + 1 until stop > #text or text:byte(stop - 1) ~= 92
      local word, rest = uncommented(text:sub(at + 1, stop - 1)):match("^%s*(%a+)(.*)")
      if word then out[#out + 1] = { at = at, word = word, rest = rest } end
      at = stop
    else
      at = at + 1
    end
  end
  local directives = out
  out, at = {}, 1
  local d = 1
  while true do
    local from = text:find('extern "C"', at, true)
    if not from then break end
    at = from + 10
    local past = text:match("^%s*__global__()", at)
    if past and starts_line(text, from) then
      while directives[d] and directives[d].at < from do out[#out + 1] = directives[d]; d = d + 1 end
      local name, list = declaration(text, past)
      if name then out[#out + 1] = { name = name, list = list and uncommented(list) } end
    end
  end
  for i = d, #directives do out[#out + 1] = directives[i] end
  return out
end

function M.reader() return { macros = {}, stack = {}, active = true, kernels = {} } end

-- Reads the rendered template `template` (its text), the next part of one
-- source: the macros it defines stay for the parts after it.
function M.read(r, text, template)
  for _, item in ipairs(items(text)) do
    if item.word then
      directive(r, item.word, item.rest)
    elseif r.active then
      r.kernels[item.name] = { list = item.list, template = template, macros = r.macros }
      r.macros_shared = true
    end
  end
end

-- The slots of a parameter list (expanded), by its text: the same lists
-- come back in plan after plan, the shapes being in the templates' constants.
local slots_of_list = {}

-- The slots of a declared kernel, or nil and why not.
local function slots(k)
  if not k.list then return nil, "its parameter list cannot be read" end
  local list, unknown = expanded(k.list, k.macros)
  if not list then
    return nil, "its parameter list uses " .. unknown .. ", a macro defined under a condition the reader cannot tell"
  end
  if slots_of_list[list] then return slots_of_list[list] end
  local out = {}
  for i, decl in ipairs(split_params(list)) do
    out[i] = slot(decl)
    if not out[i] then
      return nil, string.format("its parameter %d (%s) is of a type no launch argument binds", i, decl)
    end
  end
  slots_of_list[list] = out
  return out
end

-- What each slot takes, in words, and whether an argument is that. A
-- pointer the kernel writes through takes no in: (the caller's inputs are
-- read only); a pointer to const takes any pointer.
local function is_pointer(s) return s == "null" or s:match("^in:") or s:match("^out:") or s:match("^ws:") end
local TAKES = {
  const_pointer = { "in:NAME, out:NAME, ws:BYTES or null", is_pointer },
  pointer = { "out:NAME, ws:BYTES or null (the kernel writes through it)",
              function(s) return is_pointer(s) and not s:match("^in:") end },
  f32 = { "f32:NAME", function(s) return s:match("^f32:[%a_]+$") end },
  i32 = { "i32:N", function(s) return s:match("^i32:%-?%d+$") end },
  i64 = { "i64:N", function(s) return s:match("^i64:%-?%d+$") end },
  tmap = { "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:POINTER", function(s) return s:match("^tmap:") end },
}

-- Checks one launch (its kernel's name, the name the plan gave it, its
-- arguments, where it was made) against the kernels r has read; raises an
-- error naming the launch and the argument on a mismatch.
function M.check(r, kernel, name, args, where)
  local k = r.kernels[kernel]
  if not k then error(string.format("%slaunch %s: the source declares no kernel %s", where, name, kernel), 0) end
  local s, why = slots(k)
  if not s then error(string.format("%slaunch %s: templates/%s's %s: %s", where, name, k.template, kernel, why), 0) end
  if #args ~= #s then
    local names = {}
    for i, x in ipairs(s) do names[i] = x.name end
    error(string.format("%slaunch %s has %d argument(s), but templates/%s's %s takes %d (%s)", where, name, #args,
                        k.template, kernel, #s, table.concat(names, ", ")), 0)
  end
  for i, x in ipairs(s) do
    local takes = TAKES[x.kind == "pointer" and x.const and "const_pointer" or x.kind]
    local spec = args[i]
    if type(spec) ~= "string" or not takes[2](spec) then
      error(string.format("%slaunch %s: argument %d is \"%s\", but templates/%s's %s has `%s` there, which takes %s",
                          where, name, i, tostring(spec), k.template, kernel, x.decl, takes[1]), 0)
    end
  end
end

return M

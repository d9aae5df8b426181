-- viewer_check.lua: what the viewer's window tests share. Loaded with
--   local check = dofile(TESTS .. "/viewer_check.lua")
-- where the test's first argument is this directory and its second the folder for screenshots.
local check = {}

check.tests = arg[1]
check.shots = arg[2]
check.source = arg[3]   -- the source tree (scripts/)

-- Open the window hidden, or end the test as skipped (CTest: exit status 77) when no X server is
-- there to open it on.
function check.start()
  local ok, message = viewer.open(true)
  if not ok then
    print("SKIP: the viewer cannot open a window here: " .. tostring(message))
    os.exit(77)
  end
end

function check.shot(name)
  local path = check.shots .. "/" .. name
  assert(viewer.screenshot(path))
  return path
end

-- The box that shows node `id` in the model of the last frame (not a ghost).
function check.box_of(model, id)
  local key = model.box_of[id]
  for _, b in ipairs(model.boxes) do
    if b.key == key then return b end
  end
  return nil
end

-- The fraction of the pixels inside box b (an inset of 4 pixels, clear of the outline) that have
-- colour r, g, b in the last capture.
function check.fraction_of_colour(box, r, g, b)
  local hits, total = 0, 0
  for y = math.floor(box.y0) + 4, math.floor(box.y1) - 4 do
    for x = math.floor(box.x0) + 4, math.floor(box.x1) - 4 do
      local pr, pg, pb = viewer.pixel(x, y)
      total = total + 1
      if pr == r and pg == g and pb == b then hits = hits + 1 end
    end
  end
  return total > 0 and hits / total or 0
end

-- The highlight colour (viewer_internal.h COLOUR_HIGHLIGHT).
check.HIGHLIGHT = {255, 196, 0}

function check.highlight_fraction(box)
  return check.fraction_of_colour(box, table.unpack(check.HIGHLIGHT))
end

-- Every box of the model whose `field` is true.
function check.boxes_where(model, field)
  local out = {}
  for _, b in ipairs(model.boxes) do
    if b[field] then out[#out + 1] = b end
  end
  return out
end

return check

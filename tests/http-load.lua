-- tests/http-load.lua - the wrk script of tests/http-test.sh: buyers that
-- reserve one unit, then claim it (or, one in RELEASE_EVERY, release it)
-- over kept-alive connections, and count every answer.
--
-- wrk calls request() and response() per thread, not per connection, and
-- a response does not say which request it answers; so the server's
-- answer carries the token, and each thread remembers what it last asked
-- for each token.  A token says its item ("w<thread>-<n>-i<item>"), so the
-- test can count claimed units per item in the database.
--
-- Environment: HTTP_SHOP (1), HTTP_ITEMS ("1,2,3"), HTTP_LOCATION (1),
-- HTTP_RELEASE_EVERY (10), HTTP_ABANDON_EVERY (0: never; else one
-- checkout in N is neither claimed nor released, its hold left to
-- expire), HTTP_TOKEN_PREFIX ("w").  done() prints one line:
--   load: reserved=N claimed=N released=N sold_out=N unexpected=N
-- and the first unexpected answers.

local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  shop = os.getenv("HTTP_SHOP") or "1"
  location = os.getenv("HTTP_LOCATION") or "1"
  prefix = (os.getenv("HTTP_TOKEN_PREFIX") or "w") .. id .. "-"
  release_every = tonumber(os.getenv("HTTP_RELEASE_EVERY") or "10")
  abandon_every = tonumber(os.getenv("HTTP_ABANDON_EVERY") or "0")
  items = {}
  for it in string.gmatch(os.getenv("HTTP_ITEMS") or "1,2,3", "%d+") do
    table.insert(items, it)
  end
  headers = {["Content-Type"] = "application/x-www-form-urlencoded"}
  n = 0
  asked = {}    -- token -> "reserve", "claim" or "release"
  settle = {}   -- tokens held, to claim or release next
  reserved, claimed, released, sold_out, unexpected = 0, 0, 0, 0, 0
  first_unexpected = ""
end

function request()
  local t = table.remove(settle)
  if t then
    local op = asked[t]
    return wrk.format("POST", "/" .. op, headers,
                      "shop=" .. shop .. "&token=" .. t)
  end
  n = n + 1
  local item = items[(n % #items) + 1]
  t = prefix .. n .. "-i" .. item
  asked[t] = "reserve"
  return wrk.format("POST", "/reserve", headers,
                    "shop=" .. shop .. "&token=" .. t .. "&item=" .. item ..
                    "&location=" .. location .. "&quantity=1")
end

local function odd(status, body)
  unexpected = unexpected + 1
  if #first_unexpected < 600 then
    first_unexpected = first_unexpected .. status .. " " .. body
  end
end

function response(status, headers, body)
  local code = string.match(body, '"code":"([^"]*)"')
  local t = string.match(body, '"token":"([^"]*)"')
  local op = t and asked[t]
  if not op then
    odd(status, body)
    return
  end
  asked[t] = nil
  if op == "reserve" and code == "RSV_OK" then
    reserved = reserved + 1
    local k = tonumber(string.match(t, "-(%d+)-i"))
    if abandon_every == 0 or k % abandon_every ~= 0 then
      asked[t] = (k % release_every == 0) and "release" or "claim"
      table.insert(settle, t)
    end
  elseif op == "reserve" and code == "RSV_EOUTOFSTOCK" then
    sold_out = sold_out + 1
  elseif op == "claim" and code == "RSV_OK" then
    claimed = claimed + 1
  elseif op == "release" and code == "RSV_OK" then
    released = released + 1
  else
    odd(status, body)
  end
end

function done(summary, latency, requests)
  local t = {reserved = 0, claimed = 0, released = 0, sold_out = 0,
             unexpected = 0}
  local firsts = ""
  for _, th in ipairs(threads) do
    for k in pairs(t) do
      t[k] = t[k] + th:get(k)
    end
    firsts = firsts .. th:get("first_unexpected")
  end
  io.write(string.format(
    "load: reserved=%d claimed=%d released=%d sold_out=%d unexpected=%d\n",
    t.reserved, t.claimed, t.released, t.sold_out, t.unexpected))
  if firsts ~= "" then
    io.write("load: first unexpected answers: " .. firsts .. "\n")
  end
end

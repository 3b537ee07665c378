-- fpm-load.lua - wrk script of fpm-test.sh: GET /checkout.php for items
-- taken in turn from FPM_ITEMS ("1,2"), counting answers by status (a
-- 200 counts only with the endpoint's own answer in its body);
-- done() prints one line: "load: requests=N ok=N sold_out=N busy=N other=N".

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  items = {}
  for it in string.gmatch(os.getenv("FPM_ITEMS") or "1,2", "%d+") do
    table.insert(items, it)
  end
  n, ok, sold_out, busy, other = 0, 0, 0, 0, 0
end

function request()
  n = n + 1
  return wrk.format("GET", "/checkout.php?item=" .. items[(n % #items) + 1])
end

function response(status, headers, body)
  if status == 200 and (string.find(body, "^claimed") or string.find(body, "^released")) then ok = ok + 1
  elseif status == 409 then sold_out = sold_out + 1
  elseif status == 503 then busy = busy + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local t = {ok = 0, sold_out = 0, busy = 0, other = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do t[k] = t[k] + th:get(k) end
  end
  io.write(string.format("load: requests=%d ok=%d sold_out=%d busy=%d other=%d\n",
    summary.requests, t.ok, t.sold_out, t.busy, t.other))
end

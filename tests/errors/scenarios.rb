# frozen_string_literal: true

# The failing situations of tests/errors-test.sh through the Ruby
# binding: one line per situation, "SITUATION ERROR CODE FAILED_LINE ERRNO".
require "libreserve"

SHOP = Integer(ENV.fetch("RSV_SHOP"))

def show(situation)
  yield
  puts "#{situation} no-error 0 - -"
rescue Libreserve::Error => e
  puts "#{situation} #{e.class.name.split('::').last} #{e.code} #{e.failed_line.nil? ? '-' : e.failed_line} #{e.errno.nil? ? '-' : e.errno}"
end

if ARGV == ["readonly"]
  show("not_primary") { Libreserve.open(ENV.fetch("RSV_DSN")).close }
  exit
end
if ARGV == ["indoubt"]
  Libreserve.open(ENV.fetch("RSV_DSN_INDOUBT"), call_timeout_ms: Integer(ENV.fetch("RSV_BUDGET_MS"))) do |ctx|
    show("in_doubt") { ctx.reserve_one(SHOP, "rb-indoubt", item_id: 1, location_id: 1, quantity: 1) }
  end
  exit
end
show("wrong_password") { Libreserve.open(ENV.fetch("RSV_DSN_BADPW")) }
show("no_server") { Libreserve.open(ENV.fetch("RSV_DSN_GONE")) }
Libreserve.open(ENV.fetch("RSV_DSN")) do |ctx|
  ctx.stock_set(SHOP, item_id: 1, location_id: 1, on_hand: 3)
  show("out_of_stock") { ctx.reserve_one(SHOP, "rb-oos", item_id: 1, location_id: 1, quantity: 5) }
  ctx.reserve_one(SHOP, "rb-claimed", item_id: 1, location_id: 1, quantity: 1)
  ctx.claim(SHOP, "rb-claimed")
  show("already_claimed") { ctx.claim(SHOP, "rb-claimed") }
  show("expired") do
    ctx.reserve_one(SHOP, "rb-expired", item_id: 1, location_id: 1, quantity: 1, ttl_ms: 1)
    sleep 0.05 # past its deadline; the sweep gives the units back
    ctx.sweep(SHOP)
    ctx.claim(SHOP, "rb-expired")
  end
  show("bad_token") { ctx.reserve_one(SHOP, "", item_id: 1, location_id: 1, quantity: 1) }
end

# frozen_string_literal: true

# A context's calls against the test database: the life of a checkout,
# carts, stock, batches and statistics.

require_relative "helper"

class TestContext < Minitest::Test
  def setup
    @ctx = Libreserve.open(TestDB.dsn)
    @item = Items.next
  end

  def teardown
    @ctx.close
  end

  def test_reserve_claim
    @ctx.stock_set(1, item_id: @item, location_id: 7, on_hand: 10)
    assert @ctx.reserve_one(1, "rc-1", item_id: @item, location_id: 7, quantity: 2)
    st = @ctx.status(1, "rc-1")
    assert_equal :held, st.status
    assert_equal 2, st.units
    assert_operator st.expires_in_ms, :>, 0
    assert_equal Libreserve::Stock.new(on_hand: 10, held: 2, pooled: @ctx.stock(1, item_id: @item, location_id: 7).pooled, available: 8),
                 @ctx.stock(1, item_id: @item, location_id: 7)
    assert @ctx.claim(1, "rc-1")
    e = assert_raises(Libreserve::AlreadyClaimed) { @ctx.claim(1, "rc-1") }
    assert_equal(-4, e.code)
    assert_equal "RSV_ECLAIMED", e.code_name
    assert e.expected?
    assert_kind_of Libreserve::Error, e
    refute_empty e.detail
    assert_match(/RSV_ECLAIMED/, e.message)
    assert_raises(Libreserve::AlreadyClaimed) { @ctx.reserve_one(1, "rc-1", item_id: @item, location_id: 7, quantity: 2) }
    stock = @ctx.stock(1, item_id: @item, location_id: 7)
    assert_equal [8, 0], [stock.on_hand, stock.held]
    assert_equal :claimed, @ctx.status(1, "rc-1").status
  end

  def test_cart_out_of_stock_and_release
    other = Items.next
    @ctx.stock_set(2, item_id: @item, location_id: 1, on_hand: 3)
    @ctx.stock_set(2, item_id: @item, location_id: 2, on_hand: 3)
    @ctx.stock_set(2, item_id: other, location_id: 1, on_hand: 3)
    alloc = @ctx.reserve(2, "cart-1", [
                           { item_id: @item, locations: [1, 2], quantity: 5, split: true },
                           { item_id: other, locations: [1], quantity: 1 }
                         ], ttl_ms: 60_000)
    assert_equal [[[1, 3], [2, 2]], [[1, 1]]], alloc.map { |l| l.map { |a| [a.location_id, a.quantity] } }
    e = assert_raises(Libreserve::OutOfStock) do
      @ctx.reserve(2, "cart-2", [{ item_id: other, locations: [1], quantity: 1 },
                                 { item_id: other, locations: [1], quantity: 5 }])
    end
    assert_equal 1, e.failed_line
    assert_raises(Libreserve::NotFound) { @ctx.status(2, "cart-2") }
    assert_raises(Libreserve::NoItem) { @ctx.reserve_one(2, "cart-3", item_id: Items.next, location_id: 1, quantity: 1) }
    assert @ctx.release(2, "cart-1")
    assert @ctx.release(2, "cart-1")
    assert_raises(Libreserve::AlreadyReleased) { @ctx.claim(2, "cart-1") }
    @ctx.reserve_one(2, "cart-4", item_id: other, location_id: 1, quantity: 1, ttl_ms: 60_000)
    @ctx.extend_hold(2, "cart-4", ttl_ms: 3_600_000)
    assert_operator @ctx.status(2, "cart-4").expires_in_ms, :>, 3_500_000
    assert_equal 4, @ctx.stock_adjust(2, item_id: other, location_id: 1, delta: 1)
    assert_raises(Libreserve::StockError) { @ctx.stock_set(2, item_id: other, location_id: 1, on_hand: 0) }
    assert_empty @ctx.audit(2)
  end

  def test_batches
    @ctx.stock_set(4, item_id: @item, location_id: 1, on_hand: 3)
    entries = Array.new(4) { |i| { shop_id: 4, token: "b-#{i}", item_id: @item, location_id: 1, quantity: 1 } }
    results = @ctx.reserve_batch(entries)
    assert_equal 3, results.count(&:nil?)
    assert_equal 1, results.count { |r| r.is_a?(Libreserve::OutOfStock) }
    claims = @ctx.claim_batch(entries.map { |e| { shop_id: 4, token: e[:token] } })
    assert_equal 3, claims.count(&:nil?)
    assert(claims.compact.all? { |r| r.is_a?(Libreserve::NotFound) })
    assert_equal 0, @ctx.stock(4, item_id: @item, location_id: 1).on_hand
    assert_equal 4, @ctx.stats(:claim)[:calls]
    assert_raises(ArgumentError) { @ctx.stats(:nonsense) }
  end

  def test_cart_batches
    @ctx.stock_set(5, item_id: @item, location_id: 1, on_hand: 4)
    lines = [{ item_id: @item, locations: [1], quantity: 2 }]
    entries = Array.new(3) { |i| { shop_id: 5, token: "cb-#{i}", lines: lines } }
    results = @ctx.reserve_cart_batch(entries)
    held = results.reject { |r| r.is_a?(Exception) }
    assert_equal 2, held.size
    assert_equal [[1, 2]], held.first[0].map { |a| [a.location_id, a.quantity] }
    failed = results.find { |r| r.is_a?(Libreserve::OutOfStock) }
    assert_equal 0, failed.failed_line
    assert_equal 4, @ctx.stock(5, item_id: @item, location_id: 1).held
    assert_raises(TypeError) { @ctx.reserve_cart_batch([{ shop_id: 5, token: "cb-x", lines: 7 }]) }
  end

  def test_block_form_closes
    ctx = nil
    value = Libreserve.open(TestDB.dsn) do |c|
      ctx = c
      refute c.closed?
      :done
    end
    assert_equal :done, value
    assert ctx.closed?
    assert_raises(IOError) { ctx.claim(1, "x") }
    ctx.close
  end

  def test_threads_share_a_context
    @ctx.stock_set(5, item_id: @item, location_id: 1, on_hand: 100)
    threads = Array.new(8) do |t|
      Thread.new do
        @ctx.reserve_one(5, "shared-#{t}", item_id: @item, location_id: 1, quantity: 1)
        @ctx.claim(5, "shared-#{t}")
      end
    end
    threads.each(&:join)
    assert_equal 92, @ctx.stock(5, item_id: @item, location_id: 1).on_hand
  end

  def test_options
    Libreserve.open(TestDB.dsn, hold_ttl_ms: 120_000, pool_cap: 50, no_proactive_refill: true,
                                conn_tag_prefix: "shop:", call_timeout_ms: 0) do |c|
      c.stock_set(6, item_id: @item, location_id: 1, on_hand: 5)
      c.reserve_one(6, "opt-1", item_id: @item, location_id: 1, quantity: 1)
      assert_operator c.status(6, "opt-1").expires_in_ms, :<=, 120_000
    end
  end

  # The audit reports what it finds through a callback from C, made while
  # the GVL is released.
  def test_audit_finds_tampering
    @ctx.stock_set(10, item_id: @item, location_id: 1, on_hand: 5)
    assert_empty @ctx.audit(10)
    TestDB.sql("UPDATE rsv_ledger SET issued = issued + 3 WHERE shop_id = 10 AND item_id = #{@item}")
    begin
      found = @ctx.audit(10)
      refute_empty found
      assert(found.all? { |v| v.shop_id == 10 && v.item_id == @item && v.location_id == 1 && !v.problem.empty? })
      refute_empty @ctx.audit(all_shops: true)
    ensure
      TestDB.sql("UPDATE rsv_ledger SET issued = issued - 3 WHERE shop_id = 10 AND item_id = #{@item}")
    end
  end

  def test_dsn
    assert_equal "mariadb://a%40b:p%3Aw%2F%26%3F@db:3307/shop?connect_timeout=5&ssl=1",
                 Libreserve.dsn(database: "shop", user: "a@b", password: "p:w/&?", host: "db", port: 3307,
                                ssl: true, connect_timeout: 5)
  end
end

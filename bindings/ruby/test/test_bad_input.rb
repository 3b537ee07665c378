# frozen_string_literal: true

# Bad input raises the exception a Ruby caller expects (TypeError for a
# wrong type, an ArgumentError for a wrong value) before anything is sent,
# and leaves nothing in the database.

require_relative "helper"

class TestBadInput < Minitest::Test
  SHOP = 3

  def setup
    @ctx = Libreserve.open(TestDB.dsn)
    @item = Items.next
    @ctx.stock_set(SHOP, item_id: @item, location_id: 1, on_hand: 5)
  end

  def teardown
    @ctx.close
  end

  def reserve(**over)
    args = { item_id: @item, location_id: 1, quantity: 1 }.merge(over)
    token = args.delete(:token) { "bad" }
    shop = args.delete(:shop_id) { SHOP }
    @ctx.reserve_one(shop, token, **args)
  end

  def test_wrong_types_raise_type_error
    [
      -> { reserve(quantity: 2.5) },
      -> { reserve(quantity: "2") },
      -> { reserve(item_id: "42") },
      -> { reserve(token: :checkout) },
      -> { reserve(token: nil) },
      -> { reserve(shop_id: nil) },
      -> { reserve(ttl_ms: 1.5) },
      -> { @ctx.reserve(SHOP, "bad", { item_id: @item, locations: [1], quantity: 1 }) },
      -> { @ctx.reserve(SHOP, "bad", [[@item, [1], 1]]) },
      -> { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: 1, quantity: 1 }]) },
      -> { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: [1], quantity: 1, split: "yes" }]) },
      -> { @ctx.claim_batch("b-1") },
      -> { Libreserve.open(42) },
      -> { Libreserve.open(TestDB.dsn, pool_cap: "50") }
    ].each_with_index do |call, i|
      e = assert_raises(TypeError, "case #{i}") { call.call }
      refute_empty e.message
    end
  end

  def test_wrong_values_raise_argument_error
    {
      -> { reserve(token: "") } => Libreserve::InvalidToken,
      -> { reserve(token: "x" * 129) } => Libreserve::InvalidToken,
      -> { reserve(quantity: 0) } => Libreserve::InvalidQuantity,
      -> { reserve(quantity: -4) } => Libreserve::InvalidQuantity,
      -> { reserve(quantity: 1_000_000_001) } => Libreserve::InvalidQuantity,
      -> { reserve(ttl_ms: -1) } => Libreserve::InvalidQuantity,
      -> { reserve(ttl_ms: 31 * 24 * 3600 * 1000) } => Libreserve::InvalidQuantity,
      -> { reserve(shop_id: -1) } => Libreserve::InvalidArgument,
      -> { reserve(item_id: 2**64) } => Libreserve::InvalidArgument,
      -> { @ctx.reserve(SHOP, "bad", []) } => Libreserve::EmptyCart,
      -> { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: [], quantity: 1 }]) } => Libreserve::InvalidArgument,
      -> { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: [1, 1], quantity: 1 }]) } => Libreserve::InvalidArgument,
      -> { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: (1..17).to_a, quantity: 1 }]) } => Libreserve::CartTooBig,
      -> { @ctx.stock_set(SHOP, item_id: @item, location_id: 1, on_hand: -1) } => Libreserve::InvalidQuantity,
      -> { @ctx.claim_batch([]) } => Libreserve::InvalidArgument,
      -> { Libreserve.open("#{TestDB.dsn}&colour=blue") } => Libreserve::InvalidArgument,
      -> { Libreserve.open("postgres://x/y") } => Libreserve::InvalidArgument,
      -> { Libreserve.open("#{TestDB.dsn}\0") } => Libreserve::InvalidArgument,
      -> { Libreserve.open(TestDB.dsn, pool_cap: 20_000) } => Libreserve::InvalidArgument,
      -> { Libreserve::Batcher.new(TestDB.dsn, connections: 0) } => Libreserve::InvalidArgument
    }.each do |call, klass|
      e = assert_raises(klass) { call.call }
      assert_kind_of ArgumentError, e
      assert_kind_of Libreserve::Error, e
      assert_operator e.code, :<, 0
      refute_empty e.detail
    end
  end

  def test_unknown_keywords
    e = assert_raises(ArgumentError) { Libreserve.open(TestDB.dsn, colour: "blue") }
    assert_match(/unknown keyword: :colour/, e.message)
    assert_raises(ArgumentError) { @ctx.reserve_one(SHOP, "bad", item_id: @item, location_id: 1, quantity: 1, color: 1) }
    assert_raises(ArgumentError) { @ctx.reserve_one(SHOP, "bad", item_id: @item, quantity: 1) }
    assert_raises(ArgumentError) { @ctx.reserve(SHOP, "bad", [{ item_id: @item, locations: [1], qty: 1 }]) }
    assert_raises(ArgumentError) { @ctx.claim_batch([{ shop_id: SHOP, tokn: "x" }]) }
  end

  def test_nothing_was_written
    test_wrong_types_raise_type_error
    test_wrong_values_raise_argument_error
    stock = @ctx.stock(SHOP, item_id: @item, location_id: 1)
    assert_equal [5, 0], [stock.on_hand, stock.held]
    assert_equal "0", TestDB.sql("SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = #{SHOP}")
  end

  def test_wrong_password
    dsn = Libreserve.dsn(database: TestDB::NAME, user: "rsv_nobody", password: "wrong", socket: TestDB::SOCKET)
    e = assert_raises(Libreserve::AuthenticationError) { Libreserve.open(dsn) }
    # no ConnectionError: a retry loop must not repeat it
    refute_kind_of Libreserve::ConnectionError, e
    assert_kind_of Libreserve::Failure, e
    assert_equal(-8, e.code)
    assert_equal 1045, e.errno
  end
end

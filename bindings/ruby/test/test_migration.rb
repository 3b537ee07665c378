# frozen_string_literal: true

# The migration handle: a shop through its stages against the test
# database, the old store a Hash of this process, the stages set in
# rsv_migration_stage as rsv-admin migrate sets them.

require_relative "helper"

class TestMigration < Minitest::Test
  # Counters and holds in a Hash, as the Redis design kept them; notes the
  # Ruby thread each call ran on.
  class OldStore
    attr_reader :holds, :threads, :lock
    attr_accessor :stock

    def initialize(stock)
      @stock = stock
      @holds = {}
      @threads = {}
      @lock = Mutex.new
    end

    def call(op, _shop, token, _item, _loc, qty, _ttl)
      @lock.synchronize do
        @threads[[op, token]] = Thread.current
        hold = @holds[token]
        if op == :reserve
          return if hold
          raise Libreserve::OutOfStock.new(-1, "old store: #{@stock} left") if @stock < qty

          @stock -= qty
          @holds[token] = [qty, :held]
          return
        end
        raise Libreserve::NotFound, -2 if hold.nil?
        raise Libreserve::AlreadyClaimed, -4 if hold[1] == :claimed

        if op == :claim
          raise Libreserve::AlreadyReleased, -5 if hold[1] == :released

          hold[1] = :claimed
        elsif hold[1] == :held
          hold[1] = :released
          @stock += hold[0]
        end
      end
    end
  end

  @shops = 0
  @shops_lock = Mutex.new
  def self.next_shop
    @shops_lock.synchronize { 7000 + (@shops += 1) }
  end

  def setup
    @shop = self.class.next_shop
    @item = Items.next
    @ctx = Libreserve::Context.new(TestDB.dsn)
    @ctx.stock_set(@shop, item_id: @item, location_id: 1, on_hand: 10)
  end

  def teardown
    @ctx.close
  end

  # As rsv-admin migrate sets a stage: the change row locked first, the
  # next version.
  def set_stage(stage)
    TestDB.sql("START TRANSACTION; UPDATE rsv_migration_change SET changes = changes + 1, changed_at = NOW(6) WHERE id = 1; " \
               "INSERT INTO rsv_migration_stage (shop_id, stage, version, changed_at) " \
               "SELECT #{@shop}, #{Libreserve::Migration::STAGES.index(stage)}, COALESCE(MAX(version), 0) + 1, NOW(6) " \
               "FROM rsv_migration_stage ON DUPLICATE KEY UPDATE stage = VALUES(stage), version = VALUES(version); " \
               "COMMIT")
  end

  def follow(m, stage)
    3000.times do
      return if m.stage(@shop) == stage

      sleep 0.01
    end
    flunk "the handle never followed shop #{@shop} to #{stage}"
  end

  def open_migration(legacy = nil, &block)
    Libreserve::Migration.open(@ctx, TestDB.dsn, refresh_ms: 100, legacy: legacy, &block)
  end

  def reserve(m, token, quantity = 1)
    m.reserve_one(@shop, token, item_id: @item, location_id: 1, quantity: quantity)
  end

  def test_stages
    old = OldStore.new(3) # libreserve has 10: the old store drifted
    open_migration(old) do |m|
      assert_equal :old, m.stage(@shop)
      assert reserve(m, "a")
      assert_same Thread.current, old.threads[[:reserve, "a"]]
      assert_raises(Libreserve::NotFound) { @ctx.status(@shop, "a") }

      set_stage(:shadow)
      follow(m, :shadow)
      reserve(m, "b", 2)
      # the old store's refusal, as its exception
      e = assert_raises(Libreserve::OutOfStock) { reserve(m, "c") }
      assert_match(/old store: 0 left/, e.message)
      assert_equal 0, e.failed_line
      assert m.claim(@shop, "b")
      assert m.drain
      assert_equal :claimed, @ctx.status(@shop, "b").status
      assert_equal :released, @ctx.status(@shop, "c").status # libreserve's hold given back
      assert_equal 1, m.stat(:old_refused_new_accepted, @shop)
      assert_equal 2, m.stat(:both_accepted)

      set_stage(:primary)
      follow(m, :primary)
      # libreserve answers, with its message; what it refused is not sent on
      e = assert_raises(Libreserve::NotFound) { m.claim(@shop, "a") }
      refute_match(/old store/, e.message)
      assert m.drain
      assert_equal [1, :held], old.holds["a"]
      old.lock.synchronize { old.stock += 5 } # a delivery
      reserve(m, "d")
      assert m.drain
      assert_equal [1, :held], old.holds["d"] # kept current ...
      mirror = old.threads[[:reserve, "d"]]
      refute_same Thread.current, mirror # ... from the handle's thread
      assert_includes m.prometheus, "libreserve_migration_stage{shop=\"#{@shop}\"} 2"

      # back to shadow: the old store decides again, and knows of d
      set_stage(:shadow)
      follow(m, :shadow)
      m.claim(@shop, "d")
      assert_raises(Libreserve::OutOfStock) { reserve(m, "f", 5) }
      assert m.drain
      assert_equal :claimed, @ctx.status(@shop, "d").status
      assert_equal 2, m.stat(:old_refused_new_accepted, @shop)
      offered, applied, dropped = %i[offered applied dropped].map { |k| m.stat(k, @shop) }
      assert_operator offered, :>, 0
      assert_equal offered, applied + dropped
      assert_empty m.legacy_errors
    end
  end

  # STATS are the library's names, in its order: the class labels of the
  # handle's text (all but the handle-wide stage_read_failed).
  def test_stats_are_the_library_names
    stats = Libreserve::Migration::STATS
    assert_equal %i[both_accepted both_refused old_refused_new_accepted old_accepted_new_refused
                    new_failed unknown old_failed offered applied dropped stage_read_failed], stats
    assert stats.frozen?
    open_migration(OldStore.new(10)) do |m|
      set_stage(:shadow)
      follow(m, :shadow)
      reserve(m, "n1")
      assert m.drain
      labels = m.prometheus.scan(/^libreserve_migration_calls_total\{shop="#{@shop}",class="(\w+)"\}/).flatten
      assert_equal stats - [:stage_read_failed], labels.map(&:to_sym)
    end
  end

  def test_errors
    seen = []
    m = open_migration
    m.legacy do |op, shop, token, item, loc, qty, ttl|
      seen << [op, shop, token, item, loc, qty, ttl]
      case token
      when "refused" then raise Libreserve::OutOfStock.new(-1, "redis: stock:#{item}:#{loc} is 0")
      when "claimed" then raise Libreserve::AlreadyClaimed, -4
      when "down" then raise IOError, "old store down"
      end
    end
    assert m.reserve_one(@shop, "ok".b, item_id: @item, location_id: 1, quantity: 3, ttl_ms: 1500)
    assert_equal [:reserve, @shop, "ok", @item, 1, 3, 1500], seen.last
    assert m.release(@shop, "ok")
    assert_equal [:release, @shop, "ok", 0, 0, 0, 0], seen.last
    e = assert_raises(Libreserve::OutOfStock) { reserve(m, "refused") }
    assert_match(/stock:#{@item}:1 is 0/, e.message)
    assert_raises(Libreserve::AlreadyClaimed) { m.claim(@shop, "claimed") }
    e = assert_raises(Libreserve::DatabaseError) { m.claim(@shop, "down") }
    assert_match(/old store down/, e.message)
    assert_instance_of IOError, e.cause
    assert_equal ["old store down"], m.legacy_errors.map(&:message)
    # refused before any store is asked
    assert_raises(Libreserve::InvalidToken) { reserve(m, "") }
    assert_raises(TypeError) { m.claim(@shop, 42) }
    assert_raises(Libreserve::InvalidArgument) { m.refresh_ms = 10 }
    assert_raises(ArgumentError) { m.stat(:nonsense) }
    assert_raises(ArgumentError) { m.legacy }
    assert_raises(TypeError) { m.legacy = 42 }

    # at shadow a failing old store is counted, not compared
    set_stage(:shadow)
    follow(m, :shadow)
    assert_raises(Libreserve::DatabaseError) { m.claim(@shop, "down") }
    assert_equal 1, m.stat(:old_failed, @shop)

    m.legacy = nil
    e = assert_raises(Libreserve::InvalidArgument) { reserve(m, "gone") }
    assert_match(/no old store/, e.message)
    m.legacy(->(*) {})
    assert reserve(m, "back")
    m.close
    assert m.closed?
    m.close
    assert_raises(IOError) { reserve(m, "closed") }
    assert_raises(IOError) { m.stage(@shop) }
    assert @ctx.reserve_one(@shop, "after", item_id: @item, location_id: 1, quantity: 1)
  end

  # The old store given as a block the test keeps no reference to, and
  # the garbage collector run: the handle's thread still reaches it.
  def test_callback_survives_gc
    old = OldStore.new(100)
    set_stage(:primary)
    open_migration do |m|
      m.legacy { |*args| old.call(*args) }
      follow(m, :primary)
      GC.start(full_mark: true, immediate_sweep: true)
      GC.compact if GC.respond_to?(:compact)
      reserve(m, "gc-1")
      assert m.drain
      assert_equal [1, :held], old.holds["gc-1"]
    end
  end

  # Buyers on several threads, monitoring threads reading the handle, and
  # the handle's thread calling the old store, all at once.
  def test_threads
    @ctx.stock_set(@shop, item_id: @item, location_id: 1, on_hand: 1000)
    old = OldStore.new(1000)
    set_stage(:primary)
    open_migration(old) do |m|
      follow(m, :primary)
      stop = false
      readers = Array.new(2) do
        Thread.new do
          until stop
            m.prometheus
            m.stat(:offered, @shop)
            Thread.pass
          end
        end
      end
      buyers = Array.new(4) do |t|
        Thread.new do
          10.times do |i|
            reserve(m, "t#{t}-#{i}")
            m.claim(@shop, "t#{t}-#{i}")
          end
        end
      end
      buyers.each(&:join)
      assert m.drain
      stop = true
      readers.each(&:join)
      assert_equal 960, old.stock
      assert_equal 40, old.holds.size
      assert(old.holds.values.all? { |_, state| state == :claimed })
    end
  end
end
